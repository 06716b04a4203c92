/**
 * The tablet server's watch on compactor nodes, against a real ZooKeeper: deaths are reported by the
 * watch, by the sweep when a watch was lost, and at once for a compactor that died before its
 * reservation was recorded; "known alive" is never claimed without a watch the session could keep.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CompactorWatch, type ReservationRef } from '../../src/tserver/compactor-watch.js';
import { ZkSession, createProtected } from '../../src/zk/index.js';
import { startProxy, uniqueName, useZooKeeper, waitFor, type TcpProxy } from '../support/index.js';

describe('compactor watch', () => {
  const zk = useZooKeeper();
  const sessions: ZkSession[] = [];
  const watches: CompactorWatch[] = [];
  const proxies: TcpProxy[] = [];
  afterEach(async () => {
    for (const w of watches.splice(0)) w.stop();
    await Promise.all(sessions.splice(0).map((s) => s.close()));
    await Promise.all(proxies.splice(0).map((p) => p.stop()));
  });

  async function session(connectString = zk().connectString): Promise<ZkSession> {
    const s = await ZkSession.connect({ connectString, sessionTimeoutMs: 4_000 });
    sessions.push(s);
    return s;
  }

  async function compactor(): Promise<{ session: ZkSession; path: string }> {
    const s = await session();
    const parent = `/${uniqueName('q')}`;
    await s.ensurePath(parent);
    return { session: s, path: (await createProtected(s, parent, 'c-', '{}')).path };
  }

  function watcher(s: ZkSession): { watch: CompactorWatch; gone: ReservationRef[][] } {
    const gone: ReservationRef[][] = [];
    const watch = new CompactorWatch(s, (_c, refs) => gone.push(refs), silentLogger());
    watch.start();
    watches.push(watch);
    return { watch, gone };
  }

  it('reports every reservation of a compactor whose node is deleted', async () => {
    const c = await compactor();
    const { watch, gone } = watcher(await session());
    expect(await watch.checkAndWatch(c.path)).toBe(true);
    watch.add(c.path, { tablet: 't1', ecid: 'e1' });
    watch.add(c.path, { tablet: 't2', ecid: 'e2' });
    await c.session.close();
    await waitFor(async () => gone.length === 1, 'the death to be reported', 5_000);
    expect(gone[0]!.map((r) => r.ecid).sort()).toEqual(['e1', 'e2']);
    expect(watch.knownAlive(c.path)).toBe(false);
  });

  it('a sweep catches a death whose watch was lost, and reports it again until the reservation is gone', async () => {
    const c = await compactor();
    const { watch, gone } = watcher(await session());
    const ref = { tablet: 't', ecid: 'e' };
    watch.add(c.path, ref); // recorded without a watch, as after a lost one
    await c.session.close();
    await new Promise((r) => setTimeout(r, 200));
    expect(gone).toEqual([]); // nothing watched it
    await watch.sweep([[c.path, ref]], () => true);
    expect(gone).toEqual([[ref]]);
    // Its cancellation failed, say: the reservation is still there at the next sweep, and reported again.
    await watch.sweep([[c.path, ref]], () => true);
    expect(gone).toEqual([[ref], [ref]]);
  });

  it('a sweep records the reservations of live compactors, whose later death is then reported', async () => {
    const c = await compactor();
    const { watch, gone } = watcher(await session());
    const ref = { tablet: 't', ecid: 'e' };
    await watch.sweep([[c.path, ref]], () => true);
    expect(gone).toEqual([]);
    expect(watch.knownAlive(c.path)).toBe(true);
    await c.session.close();
    await waitFor(async () => gone.length === 1, 'the watch to report the death', 5_000);
  });

  it('a sweep leaves out reservations that ended meanwhile: neither recorded nor reported', async () => {
    const live = await compactor();
    const dead = await compactor();
    const { watch, gone } = watcher(await session());
    const current = (r: ReservationRef) => r.ecid !== 'ended';
    await dead.session.close();
    await watch.sweep(
      [
        [live.path, { tablet: 't', ecid: 'ended' }],
        [dead.path, { tablet: 't', ecid: 'ended' }],
      ],
      current,
    );
    expect(gone).toEqual([]);
    // Had the live compactor's ended reservation been recorded, its death would report it now.
    await live.session.close();
    await waitFor(async () => !watch.knownAlive(live.path), 'the watch to fire', 5_000);
    expect(gone).toEqual([]);
    expect(watch.watched).toEqual([]);
  });

  it('a compactor that died before its reservation was recorded is reported as soon as it is', async () => {
    const c = await compactor();
    const { watch, gone } = watcher(await session());
    expect(await watch.checkAndWatch(c.path)).toBe(true);
    await c.session.close();
    await waitFor(async () => !watch.knownAlive(c.path), 'the watch to fire', 5_000);
    expect(gone).toEqual([]);
    watch.add(c.path, { tablet: 't', ecid: 'late' });
    expect(gone).toEqual([[{ tablet: 't', ecid: 'late' }]]);
    expect(await watch.checkAndWatch(c.path)).toBe(false);
  });

  it('a node missing from a view that predates its creation (a lagging follower) is not declared dead', async () => {
    const c = await compactor();
    const parent = c.path.slice(0, c.path.lastIndexOf('/'));
    // The queue's next compactor, as one that registered on a server this one's has not caught up with:
    // its sequence number is one the parent has not given out in this view.
    const next = `${parent}/_c_0b9f3c2e-1a4d-4e6f-9a7b-2c3d4e5f6a7b-c-${String(1).padStart(10, '0')}`;
    const { watch, gone } = watcher(await session());
    await expect(watch.checkAndWatch(next)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(watch.diedAt(next)).toBeUndefined();
    const ref = { tablet: 't', ecid: 'e' };
    await watch.sweep([[next, ref]], () => true);
    expect(gone).toEqual([]);
    // Once the view has it, it is checked as usual: alive, then dead when it goes.
    const created = await c.session.create(next.slice(0, -10), '{}', 'ephemeral-sequential');
    expect(created).toBe(next);
    expect(await watch.checkAndWatch(next)).toBe(true);
    await c.session.delete(next);
    await waitFor(async () => watch.diedAt(next) !== undefined, 'the watch to see it go', 5_000);
    expect(await watch.checkAndWatch(next)).toBe(false);
  });

  it('a node created and deleted before the check is dead: its absence is proven by the parent', async () => {
    const c = await compactor();
    await c.session.delete(c.path);
    const { watch } = watcher(await session());
    expect(await watch.checkAndWatch(c.path)).toBe(false);
    expect(watch.diedAt(c.path)).toBeDefined();
  });

  it('knownAlive needs a watch set since the last disconnection', async () => {
    const c = await compactor();
    const proxy = await startProxy(zk().port);
    proxies.push(proxy);
    const s = await session(proxy.address);
    const { watch } = watcher(s);
    expect(watch.knownAlive(c.path)).toBe(false); // never checked
    expect(await watch.checkAndWatch(c.path)).toBe(true);
    expect(watch.knownAlive(c.path)).toBe(true);
    const reconnected = new Promise<void>((r) => s.once('reconnected', r));
    proxy.dropConnections();
    await reconnected;
    expect(watch.knownAlive(c.path)).toBe(false); // the session was suspended since
    expect(await watch.checkAndWatch(c.path)).toBe(true);
    expect(watch.knownAlive(c.path)).toBe(true);
  });
});
