/**
 * A table taken offline and brought back (issue 44; DESIGN.md, "Offline tables"), with real processes:
 * the three compactions running on its tablets end within 2 s of the answer, with no commit tried and no
 * output left, each outcome saying `table-offline`; its tablets are hosted nowhere and queue nothing;
 * scans and ingest exit 1 naming the table; a user compaction asked before stays pending and completes
 * once the table is online, and a scan returns exactly what was written.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../../src/meta/outcomes.js';
import { cliJson, cliOk } from '../support/cli.js';
import {
  DataModel,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type CompactorProcess,
} from '../support/index.js';

function rows(prefix: string, count: number, ts: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(5, '0')}`,
    ts,
    value: `v${ts}-${'x'.repeat(60)}-${i}`,
  }));
}

describe('table offline and online', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 6_000 });

  it('offline stops its compactions at once and keeps a pending user compaction; online brings all back', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['b', 'c'] });
    const model = new DataModel();
    // Three files in each of the three tablets: one job each.
    for (const ts of [1, 2, 3])
      for (const p of ['a', 'b~', 'c~']) {
        const batch = rows(p, 3_000, ts);
        await s.client.ingest(s.table, batch);
        model.write(batch);
      }
    const compactors: CompactorProcess[] = [];
    for (const name of ['x', 'y', 'z'])
      compactors.push(await c.startCompactor('q', { name, args: ['--throughput', '60000'] }));
    const started = await Promise.all(
      compactors.map((p) => p.waitForLog((l) => l.msg === 'compaction started', 30_000)),
    );
    expect(new Set(started.map((l) => l.tablet)).size).toBe(3);
    // Asked while its tablets' files are being compacted: it waits for those jobs.
    const { id } = await cliJson<{ id: string }>(c, ['admin', 'table', 'compact', s.table]);
    const outputs: string[] = [];
    for (const t of s.tablets)
      for (const r of (await readTablet(s.meta, t.tablet)).reservations.values()) outputs.push(r.output);
    expect(outputs).toHaveLength(3);

    const out = await cliOk(c, ['admin', 'table', 'offline', s.table]);
    const answered = Date.now();
    expect(out).toBe(`table ${s.table} is offline: 3 running compaction(s) cancelled\n`);
    for (const [i, p] of compactors.entries()) {
      const stopped = await p.waitForLog(
        (l) => l.msg === 'compaction abandoned' && l.ecid === started[i]!.ecid,
        10_000,
      );
      expect(Date.parse(String(stopped.time)) - answered).toBeLessThan(2_000);
    }
    await new Promise((r) => setTimeout(r, 1_500));
    for (const p of compactors) {
      const msgs = p.lines.map((l) => String(l.msg));
      expect(msgs.filter((m) => /commit/.test(m))).toEqual([]);
      // Nothing is queued for an offline table: no compactor took a second job.
      expect(msgs.filter((m) => m === 'compaction started')).toHaveLength(1);
    }
    const store = c.store();
    for (const name of outputs) expect(await store.stat(name)).toBeNull();
    for (const l of started) {
      const o = parseOutcome((await s.meta.row(doneRow(String(l.ecid)))).get(COL_OUTCOME) ?? '');
      expect(o).toMatchObject({ outcome: 'cancelled', reason: 'table-offline' });
    }
    for (const t of s.tablets) {
      const meta = await readTablet(s.meta, t.tablet);
      expect(meta.loc ?? meta.future).toBeUndefined();
      expect(meta.queued.size).toBe(0);
      expect(meta.reservations.size).toBe(0);
      expect([...meta.userCompactions.keys()]).toEqual([id]);
    }
    const info = await cliJson<{ table: { state: string } }>(c, ['admin', 'table', 'info', s.table]);
    expect(info.table.state).toBe('offline');
    expect(await cliOk(c, ['admin', 'table', 'info', s.table])).toContain('(offline)');

    // Reading, writing, splitting and merging it fail at once, naming the table and its state.
    for (const [args, input] of [
      [['scan', s.table], undefined],
      [['ingest', s.table], '{"row":"a1","value":"v"}\n'],
      [['admin', 'table', 'split', s.table, 'b5'], undefined],
      [['admin', 'table', 'merge', s.table], undefined],
    ] as const) {
      const r = await c.cli([...args], input === undefined ? {} : { input });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`table ${s.table} is offline`);
      expect(r.stderr).toContain('TABLE_OFFLINE');
    }

    // A client that looked the table up while it was offline fails at once…
    await s.client.tablets(s.table);
    await expect(s.client.ingest(s.table, rows('a', 1, 9))).rejects.toMatchObject({ code: 'TABLE_OFFLINE' });

    // Back online: hosted again, the user compaction completes, and the data is all there.
    expect(await cliOk(c, ['admin', 'table', 'online', s.table])).toBe(`table ${s.table} is online\n`);
    // …and writes again once it is back, without being told (found by the chaos run: a client that had
    // seen the table offline refused every later write to it).
    const late = rows('z', 50, 9);
    await s.client.ingest(s.table, late);
    model.write(late);
    await waitFor(
      async () => (await s.client.tablets(s.table)).every((t) => t.loc),
      'the tablets to be hosted again',
    );
    await waitFor(
      async () =>
        (await s.meta.call<{ done: boolean }>('GET', `/v1/tables/${s.table}/compactions/${id}`)).done,
      'the user compaction to complete',
      60_000,
    );
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());
    // Each tablet holds the user compaction's output; the last one also the late write's file.
    const counts = [];
    for (const t of s.tablets) counts.push((await readTablet(s.meta, t.tablet)).files.size);
    expect(counts).toEqual([1, 1, 2]);
  }, 150_000);

  it('a compaction whose tablet server did not answer the offline is cancelled when the table is back', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q' });
    for (const ts of [1, 2, 3]) await s.client.ingest(s.table, rows('a', 3_000, ts));
    const compactor = await c.startCompactor('q', { args: ['--throughput', '20000'] });
    const started = await compactor.waitForLog((l) => l.msg === 'compaction started', 30_000);
    // Its tablet server frozen: it cannot cancel anything, so the manager takes the tablet from it.
    s.tserver.pause();
    const out = await cliOk(c, ['admin', 'table', 'offline', s.table]);
    s.tserver.resume();
    expect(out).toBe(`table ${s.table} is offline\n`);
    const meta = await readTablet(s.meta, s.tablets[0]!.tablet);
    expect(meta.loc ?? meta.future).toBeUndefined();
    expect(meta.reservations.has(String(started.ecid))).toBe(true);

    // Back online, its next host cancels the reservation made before: it never commits.
    await cliOk(c, ['admin', 'table', 'online', s.table]);
    await compactor.waitForLog((l) => l.msg === 'compaction abandoned' && l.ecid === started.ecid, 60_000);
    const o = parseOutcome((await s.meta.row(doneRow(String(started.ecid)))).get(COL_OUTCOME) ?? '');
    expect(o).toMatchObject({ outcome: 'cancelled', reason: 'table-offline' });
    expect(compactor.lines.some((l) => l.msg === 'compaction committed' && l.ecid === started.ecid)).toBe(
      false,
    );
  }, 120_000);
});
