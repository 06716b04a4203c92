/**
 * Processes that heal themselves: a manager or a tablet server whose ZooKeeper session expires (paused
 * past its timeout, then resumed) does not exit. It stops what it did under the old session at once, opens
 * a new one and serves again: the manager as a standby (or active again if no one else took over), the
 * tablet server as a fresh server the manager assigns tablets to.
 */
import { describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import type { TabletView } from '../../src/meta/views.js';
import {
  scanLines,
  startProxy,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type LogLine,
} from '../support/index.js';

const states = (lines: LogLine[], what: string): unknown[] =>
  lines.filter((l) => l.msg === `${what} state`).map((l) => l.to);

describe('rejoining after a lost session', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('manager - paused past its session with a standby: the standby takes over, the old one rejoins as the standby', async () => {
    const c = cluster();
    const first = await c.startManager({ name: 'manager-1' });
    const second = await c.startManager({ name: 'manager-2', standby: true });
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 't' });

    first.pause();
    await second.waitForLog((l) => l.msg === 'manager active', c.sessionTimeoutMs + 15_000);
    first.resume();
    await first.waitForLog(
      (l) => l.msg === 'manager state' && l.from === 'rejoining' && l.to === 'standby',
      c.sessionTimeoutMs + 15_000,
    );
    expect(first.running).toBe(true);
    expect(states(first.lines, 'manager').slice(-3)).toEqual(['expired', 'rejoining', 'standby']);
    const status = await meta.call<{ state: string; epoch: number }>('GET', '/v1/status');
    expect(status).toMatchObject({ state: 'active', epoch: 2 });

    // It really stands by: when the new active manager dies, it takes over again.
    second.kill();
    await waitFor(
      async () => first.lines.filter((l) => l.msg === 'manager active').length === 2,
      'the rejoined manager to take over',
      c.sessionTimeoutMs + 15_000,
    );
    const after = await meta.call<{ state: string; epoch: number }>('GET', '/v1/status');
    expect(after).toMatchObject({ state: 'active', epoch: 3 });
    const { tables } = await meta.call<{ tables: { name: string }[] }>('GET', '/v1/tables');
    expect(tables.map((t) => t.name)).toEqual(['t']);
  });

  it('manager - a standby whose session expires rejoins once (found by the chaos run: it rejoined twice, and a leaked session held the manager node)', async () => {
    const c = cluster();
    const active = await c.startManager({ name: 'manager-1' });
    const standby = await c.startManager({ name: 'manager-2', standby: true });
    standby.pause();
    await new Promise((r) => setTimeout(r, c.sessionTimeoutMs + 1_500));
    standby.resume();
    await standby.waitForLog(
      (l) => l.msg === 'manager state' && l.from === 'rejoining' && l.to === 'standby',
      c.sessionTimeoutMs + 15_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    // Its session was lost once, as the election saw too: one expiry, one rejoin — not two loops.
    expect(states(standby.lines, 'manager')).toEqual(['standby', 'expired', 'rejoining', 'standby']);
    // And it holds nothing it should not: when the active one dies, it takes over within the timeout.
    active.kill();
    await standby.waitForLog((l) => l.msg === 'manager active', c.sessionTimeoutMs + 10_000);
  });

  it('manager - alone and paused past its session: it takes over again by itself', async () => {
    const c = cluster();
    const only = await c.startManager({ name: 'manager-1' });
    only.pause();
    await new Promise((r) => setTimeout(r, c.sessionTimeoutMs + 1_500));
    only.resume();
    await waitFor(
      async () => only.lines.filter((l) => l.msg === 'manager active').length === 2,
      'the manager to be active again',
      c.sessionTimeoutMs + 15_000,
    );
    expect(only.running).toBe(true);
    const meta = await c.meta();
    expect(await meta.call<{ epoch: number }>('GET', '/v1/status')).toMatchObject({
      state: 'active',
      epoch: 2,
    });
  });

  it('manager - a rejoin whose first ZooKeeper calls are cut off tries again (found by the chaos soak: both managers stayed "rejoining" for good after a CONNECTION_LOSS on their new session)', async () => {
    const c = cluster();
    const proxy = await startProxy(zk().port);
    try {
      const only = await c.startManager({ name: 'manager-1', env: { EXC_ZK: proxy.address } });
      // Cut off past its session timeout: the session is lost and the manager rejoins.
      proxy.blackhole();
      await only.waitForLog(
        (l) => l.msg === 'manager state' && l.to === 'rejoining',
        c.sessionTimeoutMs + 15_000,
      );
      // Every new connection now completes its handshake and loses the request after it, with the connection:
      // the new session is opened, and the first calls made on it end in CONNECTION_LOSS.
      proxy.cutEachConnectionAfter(1);
      proxy.restore();
      proxy.dropConnections();
      await waitFor(async () => proxy.cuts >= 3, 'three calls cut off', 30_000);
      proxy.cutEachConnectionAfter(undefined);
      proxy.dropConnections();
      await waitFor(
        async () => only.lines.filter((l) => l.msg === 'manager active').length === 2,
        'the manager to be active again',
        c.sessionTimeoutMs + 20_000,
      );
      expect(only.running).toBe(true);
    } finally {
      await proxy.stop();
    }
  });

  it('tablet server - the only one, paused past its session: it rejoins, is assigned the tablets again and serves them', async () => {
    const c = cluster();
    await c.startManager();
    const tserver = await c.startTserver();
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['m'] });
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger(), moveTimeoutMs: 30_000 });
    const hosted = async (): Promise<TabletView[] | false> => {
      const tablets = await client.tablets('t');
      return tablets.every((t) => t.loc) && tablets;
    };
    const before = (await waitFor(hosted, 'tablets hosted'))[0]!.loc!;
    await client.ingest('t', [
      { row: 'a', ts: 1, value: '1' },
      { row: 'z', ts: 1, value: '2' },
    ]);

    tserver.pause();
    await new Promise((r) => setTimeout(r, c.sessionTimeoutMs + 1_500));
    tserver.resume();
    await tserver.waitForLog(
      (l) => l.msg === 'tablet server state' && l.from === 'rejoining' && l.to === 'serving',
      c.sessionTimeoutMs + 15_000,
    );
    const after = await waitFor(
      async () => {
        const t = await hosted();
        return t && t.every((x) => x.loc!.session !== before.session) && t;
      },
      'the tablets assigned to the rejoined server',
      20_000,
    );
    expect(after.map((t) => t.loc!.server)).toEqual([before.server, before.server]);
    expect(tserver.running).toBe(true);
    await client.ingest('t', [{ row: 'b', ts: 2, value: '3' }]);
    expect(await scanLines(client, 't')).toEqual(['a//@1=1', 'b//@2=3', 'z//@1=2']);
  });
});
