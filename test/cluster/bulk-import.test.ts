/**
 * Bulk import (issue 44; DESIGN.md, "Bulk import") with real processes: files written by
 * `excompact write-rfile`, spanning every tablet, imported while compactions of those tablets run, and
 * the same import run again: a scan shows every entry once, deletes in an imported file hide what is
 * older, an imported entry older than a delete is hidden or not by whether the marker is there when the
 * import is applied — and no compaction changes that later (the import waits for a running one that drops
 * markers) — and the tablets share the files. A corrupt file and an unsorted one are refused,
 * named, with nothing uploaded and nothing changed; `--stamp` gives every entry the import's time.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { importFiles, type ImportFile } from '../../src/client/bulk-import.js';
import { newFileName } from '../../src/meta/paths.js';
import { compareEntries, crc32, makeEntry, verifyRFile, writeRFile } from '../../src/storage/index.js';
import { BLOCK_HEADER_SIZE } from '../../src/storage/rfile/codec.js';
import { cliOk } from '../support/cli.js';
import {
  DataModel,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
} from '../support/index.js';
import { useTempDirs } from '../support/temp-dirs.js';

const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');

const ndjson = (entries: ClientEntry[]): string =>
  entries.map((e) => JSON.stringify({ ...e, row: String(e.row) })).join('\n') + '\n';

describe('bulk import', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);
  const temp = useTempDirs('excompact-import-');

  it('imports files spanning every tablet once, however often it runs, while compactions commit', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['f', 'm', 't'] });
    const model = new DataModel();
    // Three versions of 2,600 rows over the four tablets, then deletes of the k rows (in tablet (f, m]).
    for (const ts of [1, 2, 3]) {
      const batch = LETTERS.flatMap((l) =>
        Array.from({ length: 100 }, (_, i) => ({
          row: `${l}${String(i).padStart(3, '0')}`,
          ts,
          value: `v${ts}-${i}`,
        })),
      );
      await s.client.ingest(s.table, batch);
      model.write(batch);
    }
    const deletes = Array.from({ length: 50 }, (_, i) => ({
      row: `k${String(i).padStart(3, '0')}`,
      ts: 5,
      delete: true,
    }));
    await s.client.ingest(s.table, deletes);
    model.write(deletes);

    const dir = temp();
    // A: new rows in every tablet. B: an entry older than a delete (hidden), deletes of b rows (hide
    // versions 1-3), and an overwrite of z rows.
    const a: ClientEntry[] = LETTERS.flatMap((l) =>
      Array.from({ length: 40 }, (_, i) => ({
        row: `${l}-imp${String(i).padStart(2, '0')}`,
        ts: 10,
        value: `imp-${i}`,
      })),
    );
    const b: ClientEntry[] = [
      { row: 'k001', ts: 4, value: 'older than its delete' },
      ...Array.from({ length: 20 }, (_, i) => ({
        row: `b${String(i).padStart(3, '0')}`,
        ts: 12,
        delete: true,
      })),
      ...Array.from({ length: 20 }, (_, i) => ({
        row: `z${String(i).padStart(3, '0')}`,
        ts: 11,
        value: `z-new-${i}`,
      })),
    ];
    // Unsorted on purpose: write-rfile sorts.
    writeFileSync(join(dir, 'a.ndjson'), ndjson([...a].reverse()));
    writeFileSync(join(dir, 'b.ndjson'), ndjson(b));
    expect(await cliOk(c, ['write-rfile', join(dir, 'a.rf'), join(dir, 'a.ndjson')])).toMatch(
      /^wrote 1040 entries to /,
    );
    await cliOk(c, ['write-rfile', join(dir, 'b.rf'), join(dir, 'b.ndjson')]);

    // Slow compactors, one per tablet: each job has every file of its tablet and drops its delete
    // markers, and all four run while the import does (the k tablet's import waits for its job).
    const compactors = await Promise.all(
      ['w', 'x', 'y', 'z'].map((name) => c.startCompactor('q', { name, args: ['--throughput', '20000'] })),
    );
    await Promise.all(compactors.map((p) => p.waitForLog((l) => l.msg === 'compaction started', 30_000)));

    const first = await cliOk(c, ['import', s.table, join(dir, 'a.rf'), join(dir, 'b.rf')]);
    expect(first).toMatch(
      /^imported 2 files \(1081 entries\) into TABLE1: 4 tablets took them \(import id h[0-9a-f]{40}\)\n$/,
    );
    model.write(a);
    model.write(b.slice(1));
    const again = await cliOk(c, ['import', s.table, dir]);
    expect(again).toMatch(/: 0 tablets took them; 4 had it already \(import id /);
    // k001 at 4 is hidden by the delete at 5 while its marker exists when the import is applied; the
    // tablet's job that drops the marker was running, and the import waited for it to commit: so it shows.
    // Either way, no compaction changes that afterwards.
    const imported1 = await scanLines(s.client, s.table);
    const k001 = 'k001//@4=older than its delete';
    const expected = [...model.expected(), ...(imported1.includes(k001) ? [k001] : [])].sort((x, y) =>
      Buffer.compare(Buffer.from(x.split('/')[0]!), Buffer.from(y.split('/')[0]!)),
    );
    expect(imported1).toEqual(expected);

    // Each tablet references the uploaded a.rf (one object, shared) and its share of b.rf.
    const imported = async () => {
      const names = new Set<string>();
      for (const t of s.tablets)
        for (const f of (await readTablet(s.meta, t.tablet)).files.keys())
          if (/\/B[0-9A-Z]{26}\.rf$/.test(f)) names.add(f);
      return names;
    };
    expect((await imported()).size).toBe(2);
    for (const t of s.tablets) {
      const files = [...(await readTablet(s.meta, t.tablet)).files.keys()];
      expect(files.filter((f) => /\/B/.test(f)).length).toBeGreaterThanOrEqual(1);
    }

    // Compactions commit on those tablets, the imported files among their inputs: nothing changes.
    await cliOk(c, ['admin', 'table', 'compact', s.table, '--wait']);
    await waitFor(async () => (await imported()).size === 0, 'imported files compacted away', 60_000);
    const committed = compactors.flatMap((p) => p.lines.filter((l) => l.msg === 'compaction committed'));
    expect(committed.length).toBeGreaterThanOrEqual(8);
    expect(await scanLines(s.client, s.table)).toEqual(imported1);
  });

  it('refuses a corrupt file and an unsorted one, naming them, and changes nothing', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['m'] });
    await s.client.ingest(s.table, [{ row: 'a', ts: 1, value: 'x' }]);
    const dir = temp();
    const rows = Array.from({ length: 300 }, (_, i) => ({
      row: `r${String(i).padStart(3, '0')}`,
      ts: 7,
      value: `v${i}`,
    }));
    writeFileSync(join(dir, 'in.ndjson'), ndjson(rows));
    await cliOk(c, ['write-rfile', join(dir, 'good.rf'), join(dir, 'in.ndjson'), '--compression', 'none']);
    const good = readFileSync(join(dir, 'good.rf'));

    // One byte of a block changed: its checksum no longer matches.
    const corrupt = Buffer.from(good);
    corrupt[BLOCK_HEADER_SIZE + 40] = corrupt[BLOCK_HEADER_SIZE + 40]! ^ 0xff;
    writeFileSync(join(dir, 'corrupt.rf'), corrupt);
    // Rows r001 -> r999 in the first block, its checksums sealed again: whole, but out of order.
    const unsorted = Buffer.from(good);
    const payload = unsorted.subarray(BLOCK_HEADER_SIZE, BLOCK_HEADER_SIZE + unsorted.readUInt32BE(8));
    const at = payload.indexOf('r001');
    payload.write('r999', at);
    unsorted.writeUInt32BE(crc32(payload), 20);
    unsorted.writeUInt32BE(crc32(unsorted.subarray(0, 24)), 24);
    writeFileSync(join(dir, 'unsorted.rf'), unsorted);

    const before = await Promise.all(
      s.tablets.map(async (t) => [...(await readTablet(s.meta, t.tablet)).files.keys()]),
    );
    const store = c.store();
    const objects = async () => {
      const out: string[] = [];
      for await (const o of store.list('tables/')) out.push(o.name);
      return out.sort();
    };
    const stored = await objects();
    for (const [bad, problem] of [
      ['corrupt.rf', /checksum/],
      ['unsorted.rf', /out of order/],
    ] as const) {
      const r = await c.cli(['import', s.table, join(dir, 'good.rf'), join(dir, bad)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(join(dir, bad));
      expect(r.stderr).toMatch(problem);
      expect(r.stderr).toContain('nothing was imported');
    }
    const after = await Promise.all(
      s.tablets.map(async (t) => [...(await readTablet(s.meta, t.tablet)).files.keys()]),
    );
    expect(after).toEqual(before);
    expect(await objects()).toEqual(stored);
    expect(await scanLines(s.client, s.table)).toEqual(['a//@1=x']);

    // The good file alone, stamped: every entry at the import's time, after what the tablets held.
    const from = Date.now();
    await cliOk(c, ['import', s.table, join(dir, 'good.rf'), '--stamp']);
    const scanned = [];
    for await (const e of s.client.scan(s.table)) scanned.push(e);
    expect(scanned).toHaveLength(301);
    const stamps = new Set(scanned.filter((e) => e.row.toString() !== 'a').map((e) => e.ts));
    expect(stamps.size).toBe(1);
    expect([...stamps][0]).toBeGreaterThanOrEqual(from);
  });

  it('follows tablets that split and merged: every row of a file once, however the tablets changed', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['g', 'm'] });
    const store = c.store();
    const entries = Array.from({ length: 260 }, (_, i) =>
      makeEntry(`${String.fromCharCode(97 + (i % 26))}${String(i).padStart(3, '0')}`, '', '', 9, `v${i}`),
    ).sort(compareEntries);
    const upload = async (): Promise<ImportFile> => {
      const name = newFileName((await s.client.table(s.table)).id, 'import');
      await writeRFile(store, name, entries);
      const f = await verifyRFile(store, name);
      return {
        name,
        entries: f.entries,
        deletes: f.deletes,
        oldestTs: f.oldestTs,
        newestTs: f.newestTs,
        firstRow: f.firstRow!,
        lastRow: f.lastRow!,
      };
    };
    const expected = entries.map((e) => `${e.key.row.toString()}//@9=${e.value.toString()}`);

    // The client's view is from before a split at d: the request for (-inf, g] is refused and cut.
    await s.client.tablets(s.table);
    await cliOk(c, ['admin', 'table', 'split', s.table, 'd']);
    const first = await importFiles(s.client, s.table, 'split-1', [await upload()]);
    expect(first).toMatchObject({ tablets: 4, repeated: 0 });
    expect(await scanLines(s.client, s.table)).toEqual(expected);
    expect((await importFiles(s.client, s.table, 'split-1', [await upload()])).repeated).toBe(4);

    // Applied by (d, g] only (a run that failed part way), then (d, g] and (g, m] merged: the merged
    // tablet applies the import in (g, m] alone, reading the new file there only.
    const views = await s.client.tablets(s.table);
    const dg = views.find((t) => t.endRowHex === Buffer.from('g').toString('hex'))!;
    const part = await upload();
    await s.client.postToTablet(s.table, dg.tablet, '/v1/import', {
      tablet: dg.tablet,
      importId: 'merge-1',
      rows: { start: `${Buffer.from('d').toString('hex')}00`, end: `${Buffer.from('g').toString('hex')}00` },
      files: [{ name: part.name, entries: part.entries, oldestTs: 9, newestTs: 9 }],
    });
    await cliOk(c, ['admin', 'table', 'merge', s.table, '--start', 'e', '--end', 'h']);
    const last = await upload();
    const merged = await importFiles(s.client, s.table, 'merge-1', [last]);
    expect(merged.tablets).toBe(3);
    expect(merged.repeated).toBe(0);
    expect(await scanLines(s.client, s.table)).toEqual(expected);
    const dm = (await s.client.tablets(s.table)).find(
      (t) => t.endRowHex === Buffer.from('m').toString('hex'),
    )!;
    const files = (await readTablet(s.meta, dm.tablet)).files;
    const hexOf = (r: string) => `${Buffer.from(r).toString('hex')}00`;
    // Each file of the import read in the rows it was applied to there: (d, g] and (g, m].
    expect(files.get(part.name)?.fence).toEqual([{ start: hexOf('d'), end: hexOf('g') }]);
    expect(files.get(last.name)?.fence).toEqual([{ start: hexOf('g'), end: hexOf('m') }]);
  });
});
