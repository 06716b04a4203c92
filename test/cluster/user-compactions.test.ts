/**
 * User compactions against real processes: requests coalesced into one rewrite (requests with other
 * filters in order, each once), and system compactions that go on beside a pending or running user
 * compaction, so a tablet under continuous ingest stays within `fileLimit` + `maxFiles` files.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { HistoryAnswer } from '../../src/meta/outcomes.js';
import { parseTablet } from '../../src/meta/tablet.js';
import { sleep } from '../../src/retry.js';
import {
  DataModel,
  TestCompactor,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
} from '../support/index.js';
import { cliJson, cliOk } from '../support/cli.js';

let clock = 1_000;
function batch(prefix: string, n: number, valueBytes = 10): ClientEntry[] {
  const ts = clock++;
  return Array.from({ length: n }, (_, i) => ({
    row: `${prefix}${String(i).padStart(5, '0')}`,
    cf: 'f',
    cq: 'q',
    ts,
    value: `${ts}`.padEnd(valueBytes, 'v'),
  }));
}

describe('user compactions', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  async function write(s: TableSetup, model: DataModel, entries: ClientEntry[]): Promise<void> {
    model.write(entries);
    await s.client.ingest(s.table, entries);
  }

  async function done(s: TableSetup, id: string): Promise<boolean> {
    const status = await s.meta.call<{ done: boolean }>('GET', `/v1/tables/${s.table}/compactions/${id}`);
    return status.done;
  }

  it('coalescing - five requests on a tablet: one rewrite; requests with other filters run in order, each once', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 'events', queue: 'q' });
    const model = new DataModel();
    await write(s, model, batch('a', 50));
    await write(s, model, batch('x', 50));
    await write(s, model, batch('b', 50));

    // Queued while no compactor serves the queue, as requests pile up behind a busy one.
    const compact = async (filter?: string) =>
      (
        await cliJson<{ id: string }>(c, [
          'admin',
          'table',
          'compact',
          'events',
          '--json',
          ...(filter ? ['--filter', filter] : []),
        ])
      ).id;
    const five: string[] = [];
    for (let i = 0; i < 5; i++) five.push(await compact());
    const dropX = await compact(`dropRowPrefix:${JSON.stringify({ prefixes: ['x'] })}`);
    const last = await compact();
    const row = s.tablets[0]!.tablet;
    const selected = parseTablet(row, await s.meta.row(row)).selection;
    expect(selected?.ids).toEqual(five);

    await c.startCompactor('q');
    await waitFor(
      async () => (await Promise.all([...five, dropX, last].map((id) => done(s, id)))).every(Boolean),
      'every user compaction to be done',
      60_000,
      200,
    );
    const history = await cliJson<HistoryAnswer>(c, ['admin', 'compactions', 'history', '--table', 'events']);
    const rewrites = history.outcomes
      .filter((o) => o.kind === 'user' && o.outcome === 'committed')
      .sort((a, b) => a.at - b.at);
    // One rewrite for the five, then the filtered one, then the last: in order, each once.
    expect(rewrites.map((o) => o.userCompactionIds)).toEqual([five, [dropX], [last]]);
    const expected = model.expected().filter((l) => !l.startsWith('x'));
    expect(await scanLines(s.client, 'events')).toEqual(expected);
  });

  it('no starvation - a slow user compaction and continuous ingest: system compactions go on beside it, the tablet stays within fileLimit + maxFiles', async () => {
    const c = cluster();
    const FILE_LIMIT = 6;
    const MAX_FILES = 3;
    const s = await c.startWithTable({
      table: 'events',
      queue: 'small',
      config: { fileLimit: FILE_LIMIT, maxFiles: MAX_FILES },
    });
    await cliOk(c, ['admin', 'queue', 'create', 'big']);
    // Jobs over the big first file go to `big`; jobs over small batches to `small`.
    await cliOk(c, ['admin', 'table', 'config', 'events', 'queues=small:100000,big']);
    const model = new DataModel();
    await write(s, model, batch('a', 1_000, 300));
    const row = s.tablets[0]!.tablet;
    const files = async () => parseTablet(row, await s.meta.row(row)).files;

    await c.startCompactor('small');
    const { id } = await cliJson<{ id: string }>(c, ['admin', 'table', 'compact', 'events', '--json']);
    let most = 0;
    const ingestFor = async (batches: number, prefix: string) => {
      for (let i = 0; i < batches; i++) {
        await write(s, model, batch(`${prefix}${i}-`, 5));
        most = Math.max(most, (await files()).size);
        await sleep(250);
      }
    };
    // Pending: the user job waits for a compactor of `big`, and system work goes on meanwhile.
    await ingestFor(15, 'p');
    expect(most).toBeLessThanOrEqual(FILE_LIMIT + MAX_FILES);

    // Running (slowly: held by a test compactor), and system work still goes on, never over its files.
    const slow = await TestCompactor.start(c, 'big');
    const job = await waitFor(() => slow.reserve(row), 'the user job to be reserved');
    expect(job.kind).toBe('user');
    await ingestFor(15, 'r');
    expect(most).toBeLessThanOrEqual(FILE_LIMIT + MAX_FILES);
    const now = await files();
    for (const input of job.inputs) expect(now.has(input.name)).toBe(true);
    expect(now.size).toBeGreaterThan(job.inputs.length); // newer files stayed out of it

    await slow.commit(job, await slow.compact(job));
    await waitFor(() => done(s, id), 'the user compaction to be done');
    await slow.close();
    expect(await scanLines(s.client, 'events')).toEqual(model.expected());
  });
});
