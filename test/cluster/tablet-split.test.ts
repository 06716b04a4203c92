/**
 * Tablet splits (issue 43; DESIGN.md, "Tablet splits and merges"), with real processes: a table created
 * without split points splits by itself as it grows past its `splitThreshold`, while compactions run and
 * a scan after every batch sees exactly what was written; an admin split is idempotent, and a compaction
 * running on the tablet when it splits keeps its work — it commits in the daughter that kept the tablet's
 * row, and the other daughter puts the same output in place of the files they shared; a client whose view
 * of the tablets is out of date writes every entry once and reads every entry once.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { TabletView } from '../../src/meta/views.js';
import { cliJson, cliOk } from '../support/cli.js';
import {
  allTablets,
  cellLine,
  DataModel,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
} from '../support/index.js';

interface Report {
  ok: boolean;
  problems: Record<string, { count: number; severity: string }>;
}

/** `count` rows from `from`, each written at `ts`, values long enough that a few batches pass 64 KiB. */
function rows(from: number, count: number, ts: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `row${String(((from + i) * 7919) % 100_000).padStart(5, '0')}`,
    ts,
    value: `v${ts}-${'x'.repeat(60)}-${from + i}`,
  }));
}

describe('tablet splits', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, {
    sessionTimeoutMs: 6_000,
    env: { EXC_GC_GRACE_MS: '1000', EXC_GC_SWEEP_INTERVAL_MS: '0' },
  });

  it('a table without split points splits by itself as it grows; every scan meanwhile is exact', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', config: { splitThreshold: 48 * 1024 } });
    await c.startCompactor('q', { name: 'a' });
    const model = new DataModel();
    let tablets: TabletView[] = [];
    for (let i = 0; i < 24; i++) {
      const batch = rows(i * 150, 150, 1_000 + i);
      await s.client.ingest(s.table, batch);
      model.write(batch);
      expect(await scanLines(s.client, s.table)).toEqual(model.expected());
    }
    tablets = await waitFor(async () => {
      const t = await s.client.tablets(s.table);
      return t.length >= 4 && t;
    }, 'the table to split into at least 4 tablets');
    // The daughters chain: each starts where the one before ends, the first and the last unbounded.
    expect(tablets[0]!.prevEndRowHex).toBeNull();
    expect(tablets.at(-1)!.endRowHex).toBeNull();
    for (let i = 1; i < tablets.length; i++)
      expect(tablets[i]!.prevEndRowHex).toBe(tablets[i - 1]!.endRowHex);
    expect(s.tserver.lines.filter((l) => l.msg === 'tablet split' && l.why === 'threshold').length).toBe(
      tablets.length - 1,
    );
    expect(await scanLines(s.client, s.table)).toEqual(model.expected());
    const report = await cliJson<Report>(c, ['admin', 'check']);
    expect(report.problems.tabletCoverage!.count).toBe(0);
    expect(report.problems.missingFiles!.count).toBe(0);
    expect(report.problems.sharedInputs!.count).toBe(0);
  }, 180_000);

  it('admin split: idempotent; a compaction running across it commits, and the other daughter installs its output', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', config: { versions: 1 } });
    const tablet = s.tablets[0]!.tablet;
    const model = new DataModel();
    // Three files of one size: one job over all of them (ratio 3).
    for (const ts of [1, 2, 3]) {
      const batch = rows(0, 3_000, ts);
      await s.client.ingest(s.table, batch);
      model.write(batch);
    }
    const before = await readTablet(s.meta, tablet);
    expect(before.files.size).toBe(3);
    const slow = await c.startCompactor('q', { name: 'slow', args: ['--throughput', '200000'] });
    const started = await slow.waitForLog((l) => l.msg === 'compaction started', 30_000);

    // Split at a row in the middle while it runs: nothing is cancelled, the split is one change.
    const out = await cliOk(c, ['admin', 'table', 'split', s.table, 'row50000']);
    expect(out).toContain('2 tablets; split at row50000');
    const [low, high] = await s.client.tablets(s.table);
    expect(high!.tablet).toBe(tablet);
    expect(Buffer.from(low!.endRowHex!, 'hex').toString()).toBe('row50000');
    const lowRow = await readTablet(s.meta, low!.tablet);
    expect([...lowRow.holds.keys()]).toEqual([started.ecid]);
    expect([...lowRow.files.keys()].sort()).toEqual([...before.files.keys()].sort());
    expect(s.tserver.lines.some((l) => l.msg === 'reservation cancelled')).toBe(false);
    // Asked again: already done, nothing changes.
    expect(await cliOk(c, ['admin', 'table', 'split', s.table, 'row50000'])).toContain(
      'already split at row50000',
    );
    expect(await s.client.tablets(s.table)).toHaveLength(2);

    // The compaction commits in the daughter that kept the row; the other installs the same output.
    await s.tserver.waitForLog((l) => l.msg === 'committed' && l.ecid === started.ecid, 60_000);
    await s.tserver.waitForLog((l) => l.msg === 'held compaction installed' && l.ecid === started.ecid);
    const output = (await readTablet(s.meta, tablet)).files;
    const lowAfter = await readTablet(s.meta, low!.tablet);
    expect(output.size).toBe(1);
    expect([...lowAfter.files.keys()]).toEqual([...output.keys()]);
    expect(lowAfter.holds.size).toBe(0);
    expect(await scanLines(s.client, s.table, cellLine)).toEqual(
      model.expected().map((l) => l.replace(/@\d+=/, '=')),
    );

    // The shared inputs go once no tablet references them; the output stays, referenced by both.
    await new Promise((r) => setTimeout(r, 1_200));
    await s.meta.call('POST', '/v1/gc/run', {});
    const present: string[] = [];
    for await (const o of c.store().list('tables/')) present.push(o.name);
    expect(present).toEqual([...output.keys()]);
    const report = await cliJson<Report>(c, ['admin', 'check']);
    for (const [name, p] of Object.entries(report.problems))
      if (p.severity !== 'info') expect(p.count, name).toBe(0);
  }, 150_000);

  it('a client with an out-of-date view writes and reads every entry once', async () => {
    const c = cluster();
    // Versions kept: an entry applied twice would show as a second version.
    const s = await c.startWithTable({ queue: 'q', config: { versions: 5 } });
    const first = rows(0, 2_000, 1).map(({ ts: _ts, ...e }) => e);
    await s.client.ingest(s.table, first, { requestId: 'BATCHA' });
    // The client's view is one tablet; the table now has four.
    await cliOk(c, ['admin', 'table', 'split', s.table, 'row25000', 'row50000', 'row75000']);
    expect(await allTablets(s.meta)).toHaveLength(4);
    const second = rows(2_000, 2_000, 2).map(({ ts: _ts, ...e }) => e);
    await s.client.ingest(s.table, second, { requestId: 'BATCHB' });
    // The first call repeated (its answer lost, say): every piece is a repeat, nothing is applied twice.
    const acks: boolean[] = [];
    await s.client.ingest(s.table, first, { requestId: 'BATCHA', onBatch: (b) => acks.push(b.duplicate) });
    expect(acks).toEqual([true]);
    const lines = await scanLines(s.client, s.table, cellLine);
    const expected = [...first, ...second].map((e) => `${String(e.row)}//=${String(e.value)}`);
    expect(lines.sort()).toEqual(expected.sort());
    // The pieces went to the daughters under the batch's name, with the rows they were cut to.
    const applied = s.tserver.lines.filter((l) => l.msg === 'tablet split');
    expect(applied.length).toBe(1);
  }, 120_000);
});
