/**
 * `excompact admin compactions history`: how compactions ended, from the durable outcome rows — commits,
 * and cancels with their reason — filtered and counted, surviving the restart of the tablet server that
 * wrote them.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { HistoryAnswer } from '../../src/meta/outcomes.js';
import { TestCompactor, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';
import { cliJson, cliOk } from '../support/cli.js';

function batch(prefix: string, ts: number): ClientEntry[] {
  return Array.from({ length: 20 }, (_, i) => ({ row: `${prefix}${i}`, ts, value: 'v' }));
}

describe('compaction history', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('history - commits and cancels with their reasons, filtered and counted; kept across a tablet server restart', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 'events', queue: 'q', config: { ratio: 1 } });
    const tablet = s.tablets[0]!.tablet;
    for (let i = 0; i < 3; i++) await s.client.ingest('events', batch(`a${i}-`, 10 + i));

    // One reservation cancelled by an admin, then the work done by a real compactor.
    const held = await TestCompactor.start(c, 'q');
    const job = (await held.reserve(tablet))!;
    expect(await cliOk(c, ['admin', 'compactions', 'cancel', job.ecid])).toContain(`cancelled ${job.ecid}`);
    await held.close();
    const worker = await c.startCompactor('q');
    const committed = await worker.waitForLog((l) => l.msg === 'compaction committed');

    // The tablet server that wrote the outcomes restarts: they are in the metadata store, not its memory.
    s.tserver.kill();
    await c.startTserver({ name: 'tserver-2' });
    await waitFor(async () => (await s.client.tablets('events')).every((t) => t.loc), 'tablets hosted again');

    const all = await cliJson<HistoryAnswer>(c, ['admin', 'compactions', 'history']);
    expect(all.counts).toEqual({ committed: 1, cancelled: { admin: 1 } });
    expect(all.outcomes.map((o) => [o.ecid, o.outcome, o.reason])).toEqual([
      [committed.ecid, 'committed', undefined],
      [job.ecid, 'cancelled', 'admin'],
    ]);
    expect(all.outcomes[0]).toMatchObject({ table: 'events', tablet, compactor: worker.compactor });

    const cancelled = await cliJson<HistoryAnswer>(c, [
      'admin',
      'compactions',
      'history',
      '--outcome',
      'cancelled',
    ]);
    expect(cancelled.outcomes.map((o) => o.ecid)).toEqual([job.ecid]);
    const paged = await cliJson<HistoryAnswer>(c, ['admin', 'compactions', 'history', '--limit', '1']);
    expect(paged.outcomes.map((o) => o.ecid)).toEqual([committed.ecid]);
    expect(paged.next).toBe(committed.ecid);
    expect(paged.counts.committed).toBe(1);

    // A human summary, and a clear error for a table that does not exist.
    const text = await cliOk(c, ['admin', 'compactions', 'history', '--since', '1d']);
    expect(text).toContain('1 committed, 1 cancelled (1 admin)');
    const unknown = await c.cli(['admin', 'compactions', 'history', '--table', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/nope/);
    // Cancelling what already ended says so, and is not an error.
    expect(await cliOk(c, ['admin', 'compactions', 'cancel', committed.ecid as string])).toContain(
      'already ended',
    );
  });
});
