/**
 * A tablet server whose session is lost while it waits on the manager, with the tablet server in the
 * test's own process (so a test can hold one of its calls and cut its ZooKeeper connection through a
 * proxy) against a real ZooKeeper and manager.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Generation } from '../../src/tserver/generation.js';
import { inProcessTserver } from '../support/in-process.js';
import { startProxy, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

describe('tablet server rejoin', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);
  afterEach(() => vi.restoreAllMocks());

  it('session lost while a reconciler round waits on the manager - it registers again at once, not after the call', async () => {
    const c = cluster();
    await c.startManager();
    const proxy = await startProxy(zk().port);
    const ts = inProcessTserver(c, { zk: proxy.address, compactorSweepMs: 60_000 });
    let release: (err: Error) => void = () => undefined;
    try {
      await ts.server.start();
      const meta = await c.meta();
      await meta.call('POST', '/v1/tables', { name: 't' });
      const generation = () => (ts.server as unknown as { generation?: Generation }).generation;
      const [tablet] = await waitFor(async () => {
        const hosted = generation()?.hosting.all() ?? [];
        return hosted.length === 1 && hosted;
      }, 'the tablet to be hosted');

      // A round reads the tablet back (its copy is stale) and the manager does not answer for a long time:
      // the round holds the tablet's mutex, waiting.
      const old = generation()!;
      const held = new Promise<never>((_, reject) => (release = reject));
      held.catch(() => undefined);
      const row = vi.spyOn(old.meta, 'row').mockImplementation(() => held);
      tablet!.stale = true;
      const round = old.reconciler.runRound();
      await waitFor(async () => row.mock.calls.length > 0, 'the round to call the manager');

      proxy.blackhole();
      await ts.waitForLog((l) => l.msg === 'tablet server state' && l.to === 'expired', 20_000);
      proxy.restore();
      const expiredAt = Date.now();
      await ts.waitForLog(
        (l) => l.msg === 'tablet server state' && l.from === 'rejoining' && l.to === 'serving',
        8_000,
      );
      expect(Date.now() - expiredAt).toBeLessThan(8_000);
      expect(generation()).not.toBe(old);
      // The old round is left to end on its own; what it does now is fenced by the old session's `loc`.
      row.mockRestore();
      release(new Error('the manager answers at last'));
      await round;
      expect(old.hosting.count).toBe(0);
    } finally {
      release(new Error('test over'));
      await ts.close();
      await proxy.stop();
    }
  });
});
