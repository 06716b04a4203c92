/**
 * Binary rows through the `excompact` CLI against a real cluster: the CLI shows a row that is not
 * printable as 0x and hex, and takes that form back in every row argument (split points, scan and user
 * compaction bounds); a row argument it cannot know the bytes of is refused before anything is asked.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cliJson as json, cliOk as ok } from '../support/cli.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';
import { BIN } from '../support/process-group.js';

const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
const ndjson = (rows: string[]) =>
  rows
    .map((hex) => JSON.stringify({ row: b64(hex), value: b64(hex), ts: 100, encoding: 'base64' }))
    .join('\n') + '\n';

describe('binary rows on the command line', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('split points, scan bounds and user compaction bounds in 0x-hex, as the tables show them', async () => {
    const c = cluster();
    await c.startManager();
    await c.startTserver();
    await ok(c, ['admin', 'queue', 'create', 'q']);
    // 0x80 is not UTF-8 alone: as text it could not be given at all.
    await ok(c, ['admin', 'table', 'create', 'blobs', '--splits', '0x80,0xff00', '--config', 'queues=q']);
    const shown = await ok(c, ['admin', 'table', 'info', 'blobs']);
    expect(shown).toMatch(/\s0x80\s/);
    expect(shown).toMatch(/\s0xff00\s/);
    const info = await json<{ tablets: { tablet: string; endRowHex: string | null }[] }>(c, [
      'admin',
      'table',
      'info',
      'blobs',
    ]);
    expect(info.tablets.map((t) => t.endRowHex)).toEqual(['80', 'ff00', null]);

    const rows = ['00ff', '7fff', '80', '8001', 'c0', 'ff00', 'ff01'];
    await ok(c, ['ingest', 'blobs'], ndjson(rows));
    const scan = async (...args: string[]): Promise<string[]> =>
      (await ok(c, ['scan', 'blobs', ...args]))
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => Buffer.from((JSON.parse(l) as { row: string }).row, 'base64').toString('hex'));
    expect(await scan()).toEqual(rows);
    expect(await scan('--start', '0x80', '--end', '0xC0')).toEqual(['80', '8001', 'c0']);
    expect(await scan('--start', '0x8001')).toEqual(['8001', 'c0', 'ff00', 'ff01']);

    // A tablet holds the rows after its predecessor's end row up to its own: 0x8001..0xc0 is all in the
    // middle tablet, and a user compaction of it asks only that one.
    const asked = await json<{ tablets: string[] }>(c, [
      'admin',
      'table',
      'compact',
      'blobs',
      '--start',
      '0x8001',
      '--end',
      '0xc0',
    ]);
    expect(asked.tablets).toEqual([info.tablets[1]!.tablet]);

    // Refused before anything is asked, naming the flag: not whole hex bytes after 0x, an empty split.
    for (const [args, message] of [
      [['scan', 'blobs', '--start', '0x8'], /--start "0x8": after 0x, a row's bytes in hex/],
      [['admin', 'table', 'compact', 'blobs', '--end', '0xgg'], /--end "0xgg": after 0x/],
      [['admin', 'table', 'create', 'more', '--splits', 'a,,b'], /--splits: a split point cannot be empty/],
      [
        ['admin', 'table', 'compact', 'blobs', '--start', '0xc0', '--end', '0x80'],
        /the start row 0xc0 is after the end row 0x80/,
      ],
    ] as const) {
      const r = await c.cli([...args]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect(await json<{ name: string }[]>(c, ['admin', 'table', 'list'])).toHaveLength(1);
  });

  it('an argument that is not UTF-8 is refused, not read as U+FFFD', async () => {
    const c = cluster();
    await c.startManager();
    await c.startTserver();
    await ok(c, ['admin', 'table', 'create', 'blobs']);
    // Node decodes a program's arguments as UTF-8 and the byte 0xff alone becomes U+FFFD: a shell gives
    // the raw byte (spawn only takes strings).
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(
        '/bin/sh',
        ['-c', `exec "$0" "$1" scan blobs --start "$(printf 'a\\377')"`, process.execPath, BIN],
        { env: { ...process.env, ...c.env() }, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('error', reject);
      child.once('exit', (code) => resolve({ code, stderr }));
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--start holds U\+FFFD.*give the row's bytes in hex/);
  });
});
