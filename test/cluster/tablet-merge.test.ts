/**
 * Tablet merges (issue 43; DESIGN.md, "Tablet merges"), with real processes: tablets that split, then
 * compacted apart (one of them dropped rows by a delete), merge back without rewriting anything, and the
 * merged tablet reads each shared file only in the rows of the tablets that referenced it — nothing
 * deleted comes back, before or after it compacts; a merge lets a running compaction finish first, or
 * cancels it once its wait is over; a table with `mergeBelow` merges small neighbours by itself.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { cliJson, cliOk } from '../support/cli.js';
import {
  DataModel,
  allTablets,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
} from '../support/index.js';

interface Report {
  problems: Record<string, { count: number; severity: string }>;
}

function rows(prefixes: string[], count: number, ts: number): ClientEntry[] {
  return prefixes.flatMap((p) =>
    Array.from({ length: count }, (_, i) => ({
      row: `${p}${String(i).padStart(4, '0')}`,
      ts,
      value: `v${ts}-${p}-${i}`,
    })),
  );
}

describe('tablet merges', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 6_000, env: { EXC_MERGE_WAIT_MS: '20000' } });

  it('split, compacted apart, merged back: each shared file is read only where it was, nothing deleted returns', async () => {
    const c = cluster();
    // No system compaction (ratio): only the user compactions asked for below run.
    const s = await c.startWithTable({ queue: 'q', config: { ratio: 100, versions: 1 } });
    await c.startCompactor('q');
    const model = new DataModel();
    for (const ts of [1, 2, 3]) {
      const batch = rows(['a', 'c', 'e', 'g'], 300, ts);
      await s.client.ingest(s.table, batch);
      model.write(batch);
    }
    await cliOk(c, ['admin', 'table', 'split', s.table, 'b', 'd', 'f']);
    // Deletes in the second tablet's rows only, compacted there: its share of the files goes.
    const deletes = Array.from({ length: 300 }, (_, i) => ({
      row: `c${String(i).padStart(4, '0')}`,
      ts: 10,
      delete: true,
    }));
    await s.client.ingest(s.table, deletes);
    model.write(deletes);
    await cliOk(c, ['admin', 'table', 'compact', s.table, '--start', 'c', '--end', 'c9', '--wait']);
    const second = (await s.client.tablets(s.table))[1]!;
    expect(second.files).toHaveLength(0); // every row of it deleted: nothing left
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());

    // Merged back: one tablet, the shared files fenced out of the second tablet's rows.
    const out = await cliOk(c, ['admin', 'table', 'merge', s.table]);
    expect(out).toContain('merged 4 tablets into');
    const [merged] = await allTablets(s.meta);
    expect(await allTablets(s.meta)).toHaveLength(1);
    expect(merged!.prevEndRow).toBeNull();
    const fenced = [...merged!.files.values()].filter((f) => f.fence);
    expect(fenced.length).toBeGreaterThan(0);
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());

    // Compacted whole (the fenced files through the JavaScript merge): still exactly that.
    await cliOk(c, ['admin', 'table', 'compact', s.table, '--wait']);
    const after = await readTablet(s.meta, merged!.row);
    expect(after.files.size).toBe(1);
    expect([...after.files.values()][0]!.fence).toBeUndefined();
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());
    const report = await cliJson<Report>(c, ['admin', 'check']);
    for (const [name, p] of Object.entries(report.problems))
      if (p.severity !== 'info') expect(p.count, name).toBe(0);
  }, 150_000);

  it('a merge lets a running compaction finish; past its wait it cancels one, which is no failed attempt', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['m'], config: { versions: 1 } });
    const model = new DataModel();
    for (const ts of [1, 2, 3]) {
      const batch = rows(['a', 'x'], 1_500, ts);
      await s.client.ingest(s.table, batch);
      model.write(batch);
    }
    // Both tablets have a job; at 200 KB/s each takes a second or two: the merge waits for them.
    const compactor = await c.startCompactor('q', { args: ['--throughput', '400000', '--concurrency', '2'] });
    await compactor.waitForLog((l) => l.msg === 'compaction started');
    const answer = await cliJson<{ merged: number; cancelled: number }>(c, [
      'admin',
      'table',
      'merge',
      s.table,
    ]);
    expect(answer).toMatchObject({ merged: 2, cancelled: 0 });
    expect(s.tserver.lines.filter((l) => l.msg === 'committed').length).toBeGreaterThanOrEqual(1);
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());

    // Split again, a crawling compaction, and a merge that waits one second only: it cancels it.
    await cliOk(c, ['admin', 'table', 'split', s.table, 'm']);
    await compactor.terminate();
    for (const ts of [4, 5, 6]) {
      const batch = rows(['a'], 1_500, ts);
      await s.client.ingest(s.table, batch);
      model.write(batch);
    }
    const crawl = await c.startCompactor('q', { name: 'crawl', args: ['--throughput', '2000'] });
    const started = await crawl.waitForLog((l) => l.msg === 'compaction started');
    const merger = c.cli(['admin', 'table', 'merge', s.table, '--json'], { env: {} });
    const res = await merger;
    expect(res.code, res.stderr).toBe(0);
    // The manager of this cluster waits 20 s: the crawl (minutes) is cancelled when that is over.
    const done = JSON.parse(res.stdout) as { merged: number; cancelled: number };
    expect(done).toMatchObject({ merged: 2, cancelled: 1 });
    const cancel = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === started.ecid,
    );
    expect(cancel).toMatchObject({ reason: 'merge', parked: false });
    expect(cancel.attempts).toBeUndefined();
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());
  }, 150_000);

  it('mergeBelow: small neighbours merge by themselves', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['b', 'd', 'f', 'h'] });
    const model = new DataModel();
    const batch = rows(['a', 'c', 'e', 'g', 'i'], 20, 1);
    await s.client.ingest(s.table, batch);
    model.write(batch);
    await cliOk(c, ['admin', 'table', 'config', s.table, 'mergeBelow=1M']);
    await waitFor(
      async () => (await s.client.tablets(s.table)).length === 1,
      'the table to merge into one tablet',
      60_000,
    );
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());
  }, 120_000);
});
