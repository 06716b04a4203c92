/**
 * A table's summaries (issue 45; DESIGN.md, "Summaries"), with real processes: `admin table summaries`
 * counts what ingest and compactions recorded with each file — entries, deletes, families, timestamps,
 * key and value bytes — and after a compaction of everything its counts are a full scan's, exactly.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { TableSummary } from '../../src/manager/summaries.js';
import { cliOk } from '../support/cli.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

const rows = (prefix: string, count: number, cf: string, ts: number, extra: Partial<ClientEntry> = {}) =>
  Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(3, '0')}`,
    cf,
    cq: 'q',
    ts,
    value: `${cf}-${ts}-${i}`,
    ...extra,
  }));

describe('table summaries', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it("count what was written, and a full scan's entries once everything is compacted", async () => {
    const c = cluster();
    // No compactor for the table's routes: its files stay as ingest wrote them until the user compaction.
    const s = await c.startWithTable({ queue: 'small', splits: ['m'] });
    await cliOk(c, ['admin', 'queue', 'create', 'rewrites']);
    await c.startCompactor('rewrites');
    await s.client.ingest(s.table, [
      ...rows('a', 100, 'cf', 1_000),
      ...rows('a', 100, 'meta', 1_000),
      ...rows('n', 50, 'cf', 1_000),
    ]);
    await s.client.ingest(s.table, [
      ...rows('a', 20, 'cf', 2_000, { delete: true, value: '' }),
      ...rows('n', 10, 'cf', 2_000),
    ]);
    const summary = async (...flags: string[]) =>
      JSON.parse(
        await cliOk(c, ['admin', 'table', 'summaries', s.table, ...flags, '--json']),
      ) as TableSummary;

    // Every entry stored: the hidden versions and the markers too.
    expect(await summary()).toMatchObject({
      tablets: 2,
      files: 4,
      entries: 280,
      deletes: 20,
      oldestTs: 1_000,
      newestTs: 2_000,
      families: [
        ['cf', 180],
        ['meta', 100],
      ],
      otherFamilies: 0,
      exact: true,
    });
    // The low tablet's rows; a range that cuts a tablet counts it whole and says so.
    expect(await summary('--end', 'm')).toMatchObject({ tablets: 1, entries: 220, deletes: 20, exact: true });
    const cut = await summary('--start', 'n', '--end', 'z');
    expect(cut).toMatchObject({ tablets: 1, entries: 60, exact: false });
    expect(cut.beyondRange).toHaveLength(1);
    expect(await cliOk(c, ['admin', 'table', 'summaries', s.table])).toMatch(
      /deletes\s+20\n[\s\S]*meta\s+100/,
    );

    await cliOk(c, ['admin', 'table', 'compact', s.table, '--queue', 'rewrites', '--wait']);
    const scanned = { entries: 0, keyBytes: 0, valueBytes: 0, families: new Map<string, number>() };
    for await (const e of s.client.scan(s.table)) {
      scanned.entries++;
      scanned.keyBytes += e.row.length + e.cf.length + e.cq.length;
      scanned.valueBytes += e.value.length;
      scanned.families.set(e.cf.toString(), (scanned.families.get(e.cf.toString()) ?? 0) + 1);
    }
    expect(scanned.entries).toBe(230);
    const after = await summary();
    expect(after).toMatchObject({
      files: 2,
      entries: scanned.entries,
      deletes: 0,
      keyBytes: scanned.keyBytes,
      valueBytes: scanned.valueBytes,
      families: [...scanned.families].sort(),
      exact: true,
    });
  }, 90_000);
});
