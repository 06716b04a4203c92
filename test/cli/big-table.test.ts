/**
 * A table of 50,000 tablets created from a file of split points through the `excompact` CLI against a
 * real manager: the file's points in any order, blank lines and CRLF taken, a bad line named; the table
 * is there whole, its tablets covering its rows exactly once, and `table info` shows the first thousand
 * and where to go on, or (`--limit 0`) every one of them from the pages of the tablets view.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tableRange } from '../../src/meta/keys.js';
import { cliJson as json } from '../support/cli.js';
import { tempDir, useCluster, useProcesses, useZooKeeper } from '../support/index.js';

const N = 50_000;

describe('a big table', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('admin table create --splits-file: 50,000 split points, in any order, make 50,001 tablets at once', async () => {
    const c = cluster();
    await c.startManager();
    const dir = tempDir('big-table');
    try {
      const points = Array.from({ length: N }, (_, i) => `row${String(i).padStart(6, '0')}`);
      // Reversed, with blank lines, CRLF endings and a repeat: the CLI sorts them, each once.
      const lines = [...points].reverse().map((p, i) => (i % 1000 === 0 ? `${p}\r\n\n${p}` : p));
      const file = join(dir.path, 'splits.txt');
      writeFileSync(file, `${lines.join('\n')}\n`);

      const bad = join(dir.path, 'bad.txt');
      writeFileSync(bad, 'a\nb\n0xzz\n');
      for (const [path, message] of [
        [bad, /--splits-file .*bad\.txt line 3 "0xzz": after 0x/],
        [join(dir.path, 'absent.txt'), /--splits-file .*absent\.txt: no such file/],
      ] as const) {
        const r = await c.cli(['admin', 'table', 'create', 'big', '--splits-file', path]);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(message);
      }
      expect(await json<unknown[]>(c, ['admin', 'table', 'list'])).toEqual([]);

      const created = await json<{ id: string; name: string }>(c, [
        'admin',
        'table',
        'create',
        'big',
        '--splits-file',
        file,
      ]);
      expect(created.name).toBe('big');
      const meta = await c.meta();
      const ends: string[] = [];
      const range = tableRange(created.id);
      for await (const cell of meta.scanAll({ start: range.start, end: range.end })) {
        if (cell.col === 'prev') ends.push(cell.row);
      }
      expect(ends).toHaveLength(N + 1);
      // The tablets view comes in pages (10,000 tablets at most): `table info` follows them all.
      const first = await meta.call<{ tablets: { tablet: string }[]; next?: string }>(
        'GET',
        '/v1/tables/big',
      );
      expect(first.tablets).toHaveLength(10_000);
      expect(first.next).toBe(first.tablets.at(-1)!.tablet);
      const small = await meta.call<{ tablets: { tablet: string }[]; next?: string }>(
        'GET',
        `/v1/tables/big?after=${encodeURIComponent(first.next!)}&limit=2`,
      );
      expect(small.tablets.map((t) => t.tablet)).toEqual(ends.slice(10_000, 10_002));
      // `table info` shows the first 1,000 and says where to go on; `--limit 0` follows every page.
      type Info = { tablets: { tablet: string }[]; next?: string };
      const head = await json<Info>(c, ['admin', 'table', 'info', 'big']);
      expect(head.tablets.map((t) => t.tablet)).toEqual(ends.slice(0, 1_000));
      expect(head.next).toBe(ends[999]);
      const on = await json<Info>(c, [
        'admin',
        'table',
        'info',
        'big',
        '--after',
        head.next!,
        '--limit',
        '3',
      ]);
      expect(on.tablets.map((t) => t.tablet)).toEqual(ends.slice(1_000, 1_003));
      const info = await json<Info>(c, ['admin', 'table', 'info', 'big', '--limit', '0']);
      expect(info.tablets.map((t) => t.tablet)).toEqual(ends);
      expect(info.next).toBeUndefined();
      const shown = await c.cli(['admin', 'table', 'info', 'big']);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain(`1000 tablets shown; more follow: --after ${JSON.stringify(ends[999])}`);
      const text = await c.cli(['admin', 'table', 'info', 'big', '--limit', '0']);
      expect(text.code).toBe(0);
      expect(text.stdout.match(/^table big /gm)).toHaveLength(1);
      expect(text.stdout).toContain(ends.at(-1)!);
      expect(text.stdout).not.toContain('more follow');

      const report = await json<{ ok: boolean; problems: Record<string, { count: number }> }>(c, [
        'admin',
        'check',
      ]);
      expect(report.problems.tabletCoverage?.count ?? 0).toBe(0);
    } finally {
      dir.cleanup();
    }
  }, 180_000);
});
