/**
 * Elastic tablets on several tablet servers (issue 43; DESIGN.md, "Moves and balancing"), with real
 * processes: a table created without split points splits as it grows and its tablets are spread over
 * three tablet servers within one of each other; a fourth that joins gets its share; a drained server
 * gives every tablet up while a compaction on one of them keeps running and commits at its new host; a
 * server stopped with SIGTERM hands its tablets over first; a range of tablets spread over several
 * servers merges back into one. Scans return exactly what was written throughout.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { TabletView } from '../../src/meta/views.js';
import { cliOk } from '../support/cli.js';
import {
  cellLine,
  DataModel,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
  type TserverProcess,
} from '../support/index.js';

function rows(from: number, count: number, ts: number, prefix = 'row'): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(((from + i) * 7919) % 100_000).padStart(5, '0')}`,
    ts,
    value: `v${ts}-${'x'.repeat(60)}-${from + i}`,
  }));
}

/** Tablets per server (every live one listed). */
function spread(tablets: TabletView[], servers: string[]): Map<string, number> {
  const out = new Map(servers.map((s) => [s, 0]));
  for (const t of tablets) if (t.loc) out.set(t.loc.server, (out.get(t.loc.server) ?? 0) + 1);
  return out;
}

const even = (counts: Map<string, number>): boolean =>
  Math.max(...counts.values()) - Math.min(...counts.values()) <= 1;

describe('moves and balancing', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 6_000 });

  it('splits spread over three servers; a fourth gets its share; a drain moves a running compaction, which commits', async () => {
    const c = cluster();
    const s: TableSetup = await c.startWithTable({ queue: 'q', config: { splitThreshold: 32 * 1024 } });
    const servers: TserverProcess[] = [
      s.tserver,
      await c.startTserver({ name: 'tserver-2' }),
      await c.startTserver({ name: 'tserver-3' }),
    ];
    const fast = await c.startCompactor('q', { name: 'fast' });
    const model = new DataModel();
    let ts = 1_000;
    const write = async (batch: ClientEntry[]) => {
      await s.client.ingest(s.table, batch);
      model.write(batch);
    };
    const exact = async () => expect(await scanLines(s.client, s.table)).toEqual(model.expected());
    for (let i = 0; (await s.client.tablets(s.table)).length < 8; i++) {
      expect(i).toBeLessThan(80);
      await write(rows(i * 150, 150, ts++));
      if (i % 5 === 0) await exact();
    }
    // No more splits from here on: the shape stays while it is moved around.
    await cliOk(c, ['admin', 'table', 'config', s.table, 'splitThreshold=1G']);
    const names = () => servers.map((p) => p.server);
    await waitFor(
      async () => even(spread(await s.client.tablets(s.table), names())),
      'an even spread over 3',
    );
    await exact();

    // A fourth server joins and gets its share.
    servers.push(await c.startTserver({ name: 'tserver-4' }));
    // (Read at once: every tablet hosted, none between two hosts.)
    await waitFor(
      async () => {
        const tablets = await s.client.tablets(s.table);
        const counts = spread(tablets, names());
        return tablets.every((t) => t.loc) && even(counts) && counts.get(servers[3]!.server)! >= 2;
      },
      'the fourth server to get its share',
      30_000,
    );
    await exact();

    // A slow compaction on a tablet of the server to drain.
    await fast.terminate();
    const victim = servers[1]!;
    // Four files of rows a tablet of the victim holds, by their bytes: a job over them. Of its tablets the
    // one whose rows hold most of the keys written: split points are bytes (0xa4, say), and a tablet
    // between two of them can hold none of them. (Rows made from a tablet's previous end row went
    // elsewhere when that row was not text, and no job ever came for the tablet in runs of the whole
    // suite. Three files of about the same size clear the ratio of 3 only when they compress to exactly
    // the same size; four always do.)
    const keys = rows(0, 100_000, 0).map((e) => e.row as string);
    const ownRows = (t: TabletView): string[] => {
      const prev = t.prevEndRowHex === null ? null : Buffer.from(t.prevEndRowHex, 'hex');
      const end = t.endRowHex === null ? null : Buffer.from(t.endRowHex, 'hex');
      return keys
        .filter((row) => {
          const b = Buffer.from(row);
          return (
            (prev === null || Buffer.compare(b, prev) > 0) && (end === null || Buffer.compare(b, end) <= 0)
          );
        })
        .slice(0, 2_000);
    };
    const [{ tablet, own }] = (await s.client.tablets(s.table))
      .filter((t) => t.loc?.server === victim.server)
      .map((t) => ({ tablet: t, own: ownRows(t) }))
      .sort((a, b) => b.own.length - a.own.length) as [{ tablet: TabletView; own: string[] }];
    expect(own.length).toBeGreaterThan(100);
    for (let i = 0; i < 4; i++, ts++) {
      await write(own.map((row, k) => ({ row, ts, value: `v${ts}-${'x'.repeat(60)}-${k}` })));
    }
    // Still the same tablet: nothing splits it any more.
    expect((await s.client.tablets(s.table)).map((t) => t.tablet)).toContain(tablet.tablet);
    const slow = await c.startCompactor('q', { name: 'slow', args: ['--throughput', '300000'] });
    // (It may take another tablet's queued job first.)
    const started = await slow.waitForLog(
      (l) => l.msg === 'compaction started' && l.tablet === tablet.tablet,
      60_000,
    );
    const drained = await cliOk(c, ['admin', 'tserver', 'drain', victim.server, '--wait']);
    expect(drained).toContain(`tablet server ${victim.server} is draining: it holds no tablet`);
    const list = await cliOk(c, ['admin', 'tserver', 'list']);
    expect(list).toMatch(new RegExp(`${victim.server.replace(/[.]/g, '\\.')}\\s+0\\s+.*draining`));
    // The compaction went on, followed its tablet and committed at the new host; nothing was cancelled.
    await slow.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === started.ecid, 60_000);
    // (Its new host may have given it on to another since, for balance.)
    const committers = servers.filter((p) =>
      p.lines.some((l) => l.msg === 'committed' && l.ecid === started.ecid),
    );
    expect(committers.map((p) => p.server)).toHaveLength(1);
    expect(committers[0]!.server).not.toBe(victim.server);
    for (const p of servers) expect(p.lines.some((l) => l.msg === 'reservation cancelled')).toBe(false);
    await exact();
    await waitFor(
      async () =>
        even(
          spread(
            await s.client.tablets(s.table),
            names().filter((n) => n !== victim.server),
          ),
        ),
      'an even spread without the drained server',
    );

    // Undone, it gets tablets again.
    await cliOk(c, ['admin', 'tserver', 'undrain', victim.server]);
    await waitFor(
      async () => (spread(await s.client.tablets(s.table), names()).get(victim.server) ?? 0) >= 1,
      'the undrained server to get tablets',
    );
    await exact();

    // A range of three tablets, on different servers, merged back into one.
    const before = await s.client.tablets(s.table);
    const endOf = (t: TabletView) => `0x${t.endRowHex!}`;
    const out = await cliOk(c, [
      'admin',
      'table',
      'merge',
      s.table,
      '--start',
      endOf(before[1]!),
      '--end',
      endOf(before[3]!),
    ]);
    expect(out).toContain(`merged 3 tablets into ${before[3]!.tablet}`);
    const merged = await s.client.tablets(s.table);
    expect(merged.map((t) => t.tablet)).toEqual(
      before.filter((_, i) => i !== 1 && i !== 2).map((t) => t.tablet),
    );
    expect(merged[1]!.prevEndRowHex).toBe(before[0]!.endRowHex);
    await exact();
  }, 240_000);

  it('a tablet server stopped with SIGTERM hands its tablets over before it stops', async () => {
    const c = cluster();
    const s = await c.startWithTable({
      queue: 'q',
      splits: ['row2', 'row4', 'row6', 'row8'],
      tserverEnv: { EXC_TSERVER_HANDOVER_MS: '20000' },
    });
    const other = await c.startTserver({ name: 'tserver-2' });
    await waitFor(
      async () => even(spread(await s.client.tablets(s.table), [s.tserver.server, other.server])),
      'an even spread',
    );
    const model = new DataModel();
    const batch = rows(0, 3_000, 5);
    await s.client.ingest(s.table, batch);
    model.write(batch);
    const mine = (await s.client.tablets(s.table)).filter((t) => t.loc?.server === s.tserver.server).length;
    expect(mine).toBeGreaterThanOrEqual(2);
    await s.tserver.terminate();
    const handed = s.tserver.lines.find((l) => l.msg === 'tablets handed over')!;
    expect(handed).toMatchObject({ handedOver: mine, left: 0 });
    // Every tablet was hosted by the other server before the first one's session went.
    const tablets = await s.client.tablets(s.table);
    expect(tablets.every((t) => t.loc?.server === other.server)).toBe(true);
    expect(await scanLines(s.client, s.table, cellLine)).toEqual(
      model.expected().map((l) => l.replace(/@\d+=/, '=')),
    );
  }, 120_000);
});
