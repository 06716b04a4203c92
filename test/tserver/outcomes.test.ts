/**
 * What a client can count on after the fact: every reservation leaves one durable outcome row (`~done`)
 * saying how it ended, and an ingest batch repeated under its name is applied once — on a table that
 * keeps several versions, where a second application would show as an extra version.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { ExcError } from '../../src/errors.js';
import { doneRow, parseOutcome, type Outcome } from '../../src/meta/outcomes.js';
import { ingestRow } from '../../src/meta/ingest-ids.js';
import { toWireEntry } from '../../src/client/client.js';
import {
  TestCompactor,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
} from '../support/index.js';

function batch(prefix: string, count: number, ts: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(4, '0')}`,
    cf: 'f',
    cq: 'q',
    ts,
    value: `v${ts}`,
  }));
}

async function outcomeOf(s: TableSetup, ecid: string): Promise<Outcome | undefined> {
  const cols = await s.meta.row(doneRow(ecid));
  const value = cols.get('outcome');
  return value === undefined ? undefined : parseOutcome(value);
}

describe('outcomes and repeated requests', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('outcome - a commit records "committed" once; a second commit of the same reservation is refused', async () => {
    const s = await cluster().startWithTable({ config: { ratio: 1 } });
    const tablet = s.tablets[0]!.tablet;
    for (let i = 0; i < 3; i++) await s.client.ingest('TABLE1', batch(`r${i}-`, 20, 10 + i));
    const compactor = await TestCompactor.start(cluster(), 'size256M');
    const job = (await compactor.reserve(tablet))!;
    expect(job).not.toBeNull();
    expect(await outcomeOf(s, job.ecid)).toBeUndefined();
    const result = await compactor.compact(job);
    await compactor.commit(job, result);
    expect(await outcomeOf(s, job.ecid)).toMatchObject({
      outcome: 'committed',
      tablet,
      compactor: compactor.path,
      queueId: s.queue.id,
      inputs: job.inputs.length,
      entries: 60,
      server: s.tserver.server,
    });
    const again = await compactor.commit(job, result).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ExcError);
    expect((again as ExcError).code).toBe('RESERVATION_GONE');
    expect((await outcomeOf(s, job.ecid))?.outcome).toBe('committed');
    await compactor.close();
  });

  it('outcome - a reservation of a compactor whose node goes records "cancelled" with the reason', async () => {
    const s = await cluster().startWithTable({ config: { ratio: 1 } });
    const tablet = s.tablets[0]!.tablet;
    for (let i = 0; i < 3; i++) await s.client.ingest('TABLE1', batch(`r${i}-`, 20, 10 + i));
    const compactor = await TestCompactor.start(cluster(), 'size256M');
    const job = (await compactor.reserve(tablet))!;
    await compactor.close(); // the node goes at once
    const outcome = await waitFor(() => outcomeOf(s, job.ecid), 'the cancel to be recorded');
    expect(outcome).toMatchObject({ outcome: 'cancelled', reason: 'compactor-gone', tablet });
    expect(outcome.at).toBeGreaterThanOrEqual(outcome.reservedAt);
  });

  it('ingest - a batch repeated with the same request id is applied once (a table keeping 3 versions)', async () => {
    const s = await cluster().startWithTable({ config: { versions: 3 } });
    const tablet = s.tablets[0]!.tablet;
    const tserver = cluster().client(`http://${s.tserver.server}`);
    const body = { tablet, requestId: 'batch-1', entries: batch('a', 5, 100).map(toWireEntry) };
    const first = await tserver.post<{ duplicate?: boolean; file: string | null }>('/v1/ingest', body);
    expect(first.duplicate).toBeUndefined();
    const second = await tserver.post<{ duplicate?: boolean; file: string | null }>('/v1/ingest', body);
    expect(second).toMatchObject({ duplicate: true, file: null });
    // Newer versions under another id are a new write.
    await tserver.post('/v1/ingest', {
      tablet,
      requestId: 'batch-2',
      entries: batch('a', 5, 101).map(toWireEntry),
    });
    expect(await scanLines(s.client, 'TABLE1')).toEqual(
      batch('a', 5, 0).flatMap((e) => [`${String(e.row)}/f/q@101=v101`, `${String(e.row)}/f/q@100=v100`]),
    );
    // Through the client: the whole call repeated with its request id writes nothing new, even though
    // the entries of the second call carry new timestamps a table of 3 versions would keep.
    await s.client.ingest('TABLE1', batch('b', 5, 200), { requestId: 'call-1' });
    await s.client.ingest('TABLE1', batch('b', 5, 201), { requestId: 'call-1' });
    const lines = await scanLines(s.client, 'TABLE1');
    expect(lines.filter((l) => l.startsWith('b'))).toEqual(
      batch('b', 5, 200).map((e) => `${String(e.row)}/f/q@200=v200`),
    );
    // The ids are kept in the tablet's ingest row, not in its own row (which every tablet reader parses).
    expect([...(await s.meta.row(ingestRow(tablet))).keys()].sort()).toEqual([
      'batch-1',
      'batch-2',
      'call-1.0',
    ]);
    expect([...(await s.meta.row(tablet)).keys()].filter((c) => c.startsWith('ingest'))).toEqual([]);
  });
});
