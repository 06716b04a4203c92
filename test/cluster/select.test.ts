/**
 * User compactions of chosen files (issue 44; DESIGN.md, "Chosen files"), with real processes:
 * `admin table compact --select` with each built-in selector rewrites only the files it names — read from
 * `compactions status` and from the tablets' files, whose statistics (entries, deletes, timestamps) the
 * commits recorded — and scans return what was written throughout. Bad selectors, and selectors with
 * filters, are refused with nothing asked.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { TabletMeta } from '../../src/meta/tablet.js';
import { cliOk } from '../support/cli.js';
import {
  DataModel,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
} from '../support/index.js';

const DAY = 86_400_000;

const puts = (prefix: string, count: number, ts: number, size = 200): ClientEntry[] =>
  Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(3, '0')}`,
    ts,
    value: `${prefix}${ts}-${'x'.repeat(size)}`,
  }));

describe('user compactions of chosen files', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('smaller-than, older-than and deletes-above each rewrite only the files they name', async () => {
    const c = cluster();
    // System jobs go to `small`, which no compactor serves: the tablets' files change only by the user
    // compactions, all sent to `rewrites`.
    const s = await c.startWithTable({ queue: 'small', splits: ['m'] });
    await cliOk(c, ['admin', 'queue', 'create', 'rewrites']);
    await c.startCompactor('rewrites');
    const [low, high] = s.tablets.map((t) => t.tablet) as [string, string];
    const model = new DataModel();
    const write = async (entries: ClientEntry[]) => {
      await s.client.ingest(s.table, entries);
      model.write(entries);
    };
    const now = Date.now();
    // In each tablet: an old, big file; a new, small one. In the high tablet a third file deletes half
    // of its rows (100 markers in 310 entries); in the low one, a third small file of one put.
    await write([...puts('a', 200, now - 10 * DAY), ...puts('n', 200, now - 10 * DAY)]);
    await write([...puts('a', 10, now - 1000, 20), ...puts('n', 10, now - 1000, 20)]);
    await write([
      { row: 'b000', ts: now - 500, value: 'b' },
      ...Array.from({ length: 100 }, (_, i) => ({
        row: `n${String(i).padStart(3, '0')}`,
        ts: now - 500,
        delete: true,
      })),
    ]);
    const files = async (row: string) => (await readTablet(s.meta, row)).files;
    const names = (m: TabletMeta['files']) => [...m.keys()].sort();
    const compact = async (...select: string[]) => {
      const out = await cliOk(c, [
        'admin',
        'table',
        'compact',
        s.table,
        ...select.flatMap((x) => ['--select', x]),
        '--queue',
        'rewrites',
        '--wait',
        '--json',
      ]);
      const { id } = JSON.parse(out) as { id: string };
      const status = JSON.parse(await cliOk(c, ['admin', 'compactions', 'status', id, '--json'])) as {
        select?: unknown[];
        tablets: { tablet: string; state: string; files?: string[] }[];
      };
      expect(status.select).toHaveLength(select.length);
      return new Map(status.tablets.map((t) => [t.tablet, t]));
    };
    const exact = async () => expect(await scanLines(s.client, s.table)).toEqual(model.expected());

    // The statistics each ingest recorded, as the selectors read them.
    const before = new Map([
      [low, await files(low)],
      [high, await files(high)],
    ]);
    const oldOf = (m: TabletMeta['files']) => [...m].find(([, f]) => f.entries === 200)![0];
    expect(before.get(high)!.get(oldOf(before.get(high)!))).toMatchObject({
      entries: 200,
      deletes: 0,
      oldestTs: now - 10 * DAY,
      newestTs: now - 10 * DAY,
    });
    expect([...before.get(high)!.values()].find((f) => f.deletes === 100)).toMatchObject({ entries: 100 });

    // Refused, with nothing asked of any tablet.
    const unknown = await c.cli(['admin', 'table', 'compact', s.table, '--select', 'largest']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown selector "largest"');
    const mixed = await c.cli([
      'admin',
      'table',
      'compact',
      s.table,
      '--select',
      'smaller-than:1M',
      '--filter',
      'dropRowPrefix:{"prefixes":["a"]}',
    ]);
    expect(mixed.code).toBe(1);
    expect(mixed.stderr).toContain('filters and selectors cannot be combined');
    for (const row of [low, high]) expect((await readTablet(s.meta, row)).userCompactions.size).toBe(0);

    // smaller-than: the two small files of each tablet, into one; the old one stays.
    const small = await compact('smaller-than:16K');
    for (const row of [low, high]) {
      const had = before.get(row)!;
      const old = oldOf(had);
      expect(small.get(row)).toMatchObject({ state: 'done' });
      expect(small.get(row)!.files!.sort()).toEqual(names(had).filter((f) => f !== old));
      const now1 = await files(row);
      expect(now1.size).toBe(2);
      expect(now1.has(old)).toBe(true);
    }
    // The high tablet's new file: its 100 markers kept (not every file was compacted), the puts they hide gone.
    const highSmall = [...(await files(high))].find(([name]) => name !== oldOf(before.get(high)!))![1];
    expect(highSmall).toMatchObject({ entries: 100, deletes: 100, newestTs: now - 500 });
    await exact();

    // older-than: the old file of each tablet alone (its newest entry is ten days old).
    const mid = new Map([
      [low, await files(low)],
      [high, await files(high)],
    ]);
    const aged = await compact('older-than:5d');
    for (const row of [low, high]) {
      const old = oldOf(before.get(row)!);
      expect(aged.get(row)!.files).toEqual([old]);
      const after = await files(row);
      expect(after.has(old)).toBe(false);
      const kept = names(mid.get(row)!).filter((f) => f !== old);
      expect(names(after).filter((f) => kept.includes(f))).toEqual(kept);
      expect(after.size).toBe(2);
    }
    await exact();

    // deletes-above: every file of the high tablet (a third of its entries are markers), which drops
    // them with the rows they hide; none of the low one.
    const lowBefore = names(await files(low));
    const dropped = await compact('deletes-above:0.2');
    expect(dropped.get(low)!.files ?? []).toEqual([]);
    expect(names(await files(low))).toEqual(lowBefore);
    expect(dropped.get(high)!.files).toHaveLength(2);
    const [last] = [...(await files(high)).values()];
    expect((await files(high)).size).toBe(1);
    expect(last).toMatchObject({ entries: 100, deletes: 0 });
    await exact();
  }, 120_000);
});
