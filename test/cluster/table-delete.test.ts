/**
 * Deleting a table stops the compactors working for it at once (issue 44; DESIGN.md, "Tables"), with real
 * processes: three compactions running on three tablets of a table that is deleted end within 2 s of the
 * delete's answer — each compactor finds its reservation gone from its tablet's row and stops, the abort
 * leaves no output, no commit is tried after it, and each reservation's outcome says `table-deleted`.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../../src/meta/outcomes.js';
import { cliOk } from '../support/cli.js';
import {
  readTablet,
  useCluster,
  useProcesses,
  useZooKeeper,
  type CompactorProcess,
} from '../support/index.js';

function rows(prefix: string, count: number, ts: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(5, '0')}`,
    ts,
    value: `v${ts}-${'x'.repeat(60)}-${i}`,
  }));
}

describe('table delete', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 6_000 });

  it('three compactions running on a deleted table end within 2 s of the answer, leaving nothing', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['b', 'c'] });
    // Three files in each of the three tablets: one job each.
    for (const ts of [1, 2, 3])
      for (const p of ['a', 'b~', 'c~']) await s.client.ingest(s.table, rows(p, 3_000, ts));
    const compactors: CompactorProcess[] = [];
    for (const name of ['x', 'y', 'z'])
      compactors.push(await c.startCompactor('q', { name, args: ['--throughput', '100000'] }));
    const started = await Promise.all(
      compactors.map((p) => p.waitForLog((l) => l.msg === 'compaction started', 30_000)),
    );
    expect(new Set(started.map((l) => l.tablet)).size).toBe(3);
    const outputs: string[] = [];
    for (const t of s.tablets)
      for (const r of (await readTablet(s.meta, t.tablet)).reservations.values()) outputs.push(r.output);
    expect(outputs).toHaveLength(3);

    await cliOk(c, ['admin', 'table', 'delete', s.table]);
    const answered = Date.now();
    for (const [i, p] of compactors.entries()) {
      const stopped = await p.waitForLog(
        (l) => l.msg === 'compaction abandoned' && l.ecid === started[i]!.ecid,
        10_000,
      );
      expect(Date.parse(String(stopped.time)) - answered).toBeLessThan(2_000);
      expect(p.lines.some((l) => l.msg === 'the reservation is gone from its tablet: stopping')).toBe(true);
    }
    // A while later: no commit was tried, nothing was written, and each outcome names the delete.
    await new Promise((r) => setTimeout(r, 1_500));
    for (const p of compactors) {
      const after = p.lines.map((l) => String(l.msg));
      expect(after.filter((m) => /commit/.test(m))).toEqual([]);
    }
    const store = c.store();
    for (const name of outputs) expect(await store.stat(name)).toBeNull();
    for (const l of started) {
      const o = parseOutcome((await s.meta.row(doneRow(String(l.ecid)))).get(COL_OUTCOME) ?? '');
      expect(o).toMatchObject({ outcome: 'cancelled', reason: 'table-deleted' });
    }
    // The compactors go on serving: they are idle, registered, and take the next table's work.
    for (const p of compactors) expect(p.running).toBe(true);
  }, 120_000);
});
