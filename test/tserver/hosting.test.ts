/**
 * Tablet hosting with real processes: assignment, reassignment when a tablet server dies, fencing of a
 * tablet server that lost its session, ingest and scan through the client library.
 */
import { describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import type { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import type { MetaClient } from '../../src/meta/client.js';
import { COL_LOC } from '../../src/meta/tablet.js';
import type { TabletView } from '../../src/meta/views.js';
import {
  cellLine,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TestCluster,
} from '../support/index.js';

async function tabletsOf(meta: MetaClient, table: string): Promise<TabletView[]> {
  return (await meta.call<{ tablets: TabletView[] }>('GET', `/v1/tables/${table}`)).tablets;
}

/** Polls until every tablet of `table` is hosted by one of `servers`. */
async function allHostedBy(
  meta: MetaClient,
  table: string,
  servers: string[],
  timeoutMs: number,
): Promise<TabletView[]> {
  let seen: TabletView[] = [];
  return waitFor(
    async () => {
      seen = await tabletsOf(meta, table);
      return seen.every((t) => t.loc && servers.includes(t.loc.server)) && seen;
    },
    () => `tablets hosted by ${servers.join(', ')} (last seen: ${JSON.stringify(seen.map((t) => t.loc))})`,
    timeoutMs,
    50,
  );
}

function client(cluster: TestCluster, meta: MetaClient): ExcClient {
  return new ExcClient({ meta, secret: cluster.secret, logger: silentLogger(), moveTimeoutMs: 20_000 });
}

describe('tablet hosting', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('assignment - tablets are spread evenly over the live tablet servers; ingest and scan reach them', async () => {
    await cluster().startManager();
    const a = (await cluster().startTserver({ name: 'tserver-a' })).server;
    const b = (await cluster().startTserver({ name: 'tserver-b' })).server;
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['b', 'd', 'f', 'h', 'j'] });

    const tablets = await allHostedBy(meta, 't', [a, b], 10_000);
    const counts = [a, b].map((s) => tablets.filter((t) => t.loc?.server === s).length);
    expect(counts).toEqual([3, 3]);

    const c = client(cluster(), meta);
    const rows = ['a', 'c', 'e', 'g', 'i', 'k', 'z'];
    await c.ingest(
      't',
      rows.map((row) => ({ row, cf: 'f', cq: 'q', value: `v-${row}` })),
    );
    expect(await scanLines(c, 't', cellLine)).toEqual(rows.map((r) => `${r}/f/q=v-${r}`));
    const files = (await tabletsOf(meta, 't')).map((t) => t.files.length);
    expect(files.reduce((x, y) => x + y, 0)).toBe(6); // one file per tablet that received rows (k and z share one)
  });

  it('reassignment - kill -9 a tablet server: its tablets move to the survivor within the session timeout plus a margin', async () => {
    await cluster().startManager();
    const victim = await cluster().startTserver({ name: 'victim' });
    const victimName = victim.server;
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['m'] });
    await allHostedBy(meta, 't', [victimName], 10_000);
    const c = client(cluster(), meta);
    await c.ingest('t', [
      { row: 'a', value: '1' },
      { row: 'x', value: '2' },
    ]);
    const survivorName = (await cluster().startTserver({ name: 'survivor' })).server;

    const killedAt = Date.now();
    victim.kill();
    await allHostedBy(meta, 't', [survivorName], cluster().sessionTimeoutMs + 5_000);
    const elapsed = Date.now() - killedAt;
    expect(elapsed).toBeLessThan(cluster().sessionTimeoutMs + 3_000);
    // Nothing was lost: the new host reads the same files.
    expect(await scanLines(c, 't', cellLine)).toEqual(['a//=1', 'x//=2']);
  });

  it('fencing - a paused tablet server that resumes after its session expired cannot apply any mutation', async () => {
    await cluster().startManager();
    const zombie = await cluster().startTserver({ name: 'zombie' });
    const zombieName = zombie.server;
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 't' });
    const [tablet] = await allHostedBy(meta, 't', [zombieName], 10_000);
    const zombieLoc = tablet!.loc!;
    const heirName = (await cluster().startTserver({ name: 'heir' })).server;

    zombie.pause();
    await allHostedBy(meta, 't', [heirName], cluster().sessionTimeoutMs + 10_000);
    const before = await meta.row(tablet!.tablet);

    // A write reaches the zombie while it is frozen; it handles it when it resumes, and it cannot be applied:
    // the session it names (the fencing token) has expired.
    const zombieClient = cluster().client(`http://${zombieName}`);
    const write = zombieClient
      .post(
        '/v1/ingest',
        { tablet: tablet!.tablet, entries: [{ row: Buffer.from('ghost').toString('base64'), value: '' }] },
        { attempts: 1, timeoutMs: 15_000 },
      )
      .then(
        () => undefined,
        (err: ExcError) => err,
      );
    zombie.resume();
    const refused = await write;
    // The zombie itself refuses it: FENCED when the manager refused the change it tried; NOT_SERVING or
    // UNAVAILABLE when it had already noticed its session was gone and dropped everything it hosted.
    expect(['FENCED', 'NOT_SERVING', 'UNAVAILABLE']).toContain(refused?.code);
    expect(refused?.details.remoteCode).toBe(refused?.code);

    // The store is exactly as the heir left it. The zombie dropped what it hosted and joined again with a
    // new session (it does not exit): a fresh server, whose old fencing token stays refused.
    expect(await meta.row(tablet!.tablet)).toEqual(before);
    expect((await meta.row(tablet!.tablet)).get(COL_LOC)).toContain(heirName);
    const rejoined = await zombie.waitForLog(
      (l) => l.msg === 'tablet server state' && l.from === 'rejoining' && l.to === 'serving',
      20_000,
    );
    expect(zombie.running).toBe(true);
    const states = zombie.lines.filter((l) => l.msg === 'tablet server state').map((l) => l.to);
    // (Resumed, it may see its connection drop before it hears of the expiry: serving → suspended first.)
    expect(states[0]).toBe('serving');
    expect(states.slice(-3)).toEqual(['expired', 'rejoining', 'serving']);
    expect(rejoined.cause).toMatch(/new session/);
    const again = await zombie.waitForLog(
      (l) => l.msg === 'tablet server ready' && l.session !== zombieLoc.session,
    );
    expect(again.name).toBe(zombieName);
    const c = client(cluster(), meta);
    expect(await scanLines(c, 't', cellLine)).toEqual([]);

    // Even a hand-made mutation in the zombie's name is refused by the manager.
    const err = await meta
      .mutate(
        [{ puts: [{ row: tablet!.tablet, col: 'file:tables/x/ghost.rf', value: '{"size":1,"entries":1}' }] }],
        zombieLoc,
      )
      .catch((e: unknown) => e as ExcError);
    expect((err as ExcError).code).toBe('FENCED');
  });

  it('ingest - a bad batch is rejected whole with a clear error and changes nothing', async () => {
    await cluster().startManager();
    const name = (await cluster().startTserver()).server;
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['m'] });
    const [first] = await allHostedBy(meta, 't', [name], 10_000);
    const ts = cluster().client(`http://${name}`);
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    // A row outside the tablet: its client's view is out of date (the tablet split or merged), not a bad
    // request — it looks the tablets up again (client.ts). Refused whole all the same.
    const outside = await ts
      .post('/v1/ingest', { tablet: first!.tablet, entries: [{ row: b64('a') }, { row: b64('zz') }] })
      .then(
        () => undefined,
        (e: ExcError) => e,
      );
    expect(outside?.code).toBe('TABLET_CHANGED');
    expect(outside?.message).toMatch(
      /entries\.1: row "zz" is not in tablet .*\(-∞, "m"\]: it split or merged/,
    );
    const cases: [unknown, RegExp][] = [
      [{ tablet: first!.tablet, entries: [{ row: 'not base64!' }] }, /entries\.0\.row/],
      [{ tablet: first!.tablet, entries: [{ row: b64('a'), ts: -5 }] }, /entries\.0\.ts/],
      [{ tablet: first!.tablet, entries: [] }, /at least one entry/],
      [{ tablet: first!.tablet, entries: [{ row: b64('a'), value: 42 }] }, /entries\.0\.value/],
      [{ tablet: first!.tablet }, /body\.entries/],
    ];
    for (const [body, message] of cases) {
      const err = await ts.post('/v1/ingest', body).then(
        () => undefined,
        (e: ExcError) => e,
      );
      expect(err?.code, JSON.stringify(body)).toBe('BAD_REQUEST');
      expect(err?.message).toMatch(message);
    }
    const notHere = await ts
      .post('/v1/ingest', { tablet: 'zzzz<', entries: [{ row: b64('a') }] })
      .catch((e: ExcError) => e);
    expect((notHere as ExcError).code).toBe('NOT_SERVING');
    expect((await tabletsOf(meta, 't')).flatMap((t) => t.files)).toEqual([]);
  });
});
