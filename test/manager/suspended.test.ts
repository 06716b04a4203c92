/**
 * A manager disconnected from ZooKeeper (suspended) refuses the tablet servers' writes, whose sessions it
 * cannot check. Connected again, it is active only once it has read the live tablet servers again: the
 * watch events it missed arrive after the reconnection, and until they have, a tablet server whose session
 * ended in the gap would still look live — and its write would be applied.
 *
 * The tablet server is played by a session of the test registering a node, so that its session can be
 * ended at a chosen moment; the manager's ZooKeeper traffic goes through a proxy that cuts it off, then
 * passes the answers on late (a slow network), which makes the gap between the reconnection and the
 * re-read wide enough to send writes into.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { ZkSession, digestAuthFromSecret } from '../../src/zk/index.js';
import { startProxy, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const SERVER = '127.0.0.1:1';

describe('manager - suspended', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 4_000 });

  it('suspended - back from a disconnection, it refuses a tablet server whose session ended in the gap: it reads the live servers before it is active', async () => {
    const c = cluster();
    const proxy = await startProxy(zk().port);
    const tserver = await ZkSession.connect({
      connectString: zk().connectString,
      sessionTimeoutMs: 4_000,
      auth: digestAuthFromSecret(c.secret),
    });
    try {
      const manager = await c.startManager({ env: { EXC_ZK: proxy.address } });
      const rpc = c.client(await c.managerUrl());
      await tserver.create(c.layout.tserverNode(SERVER), '{}', 'ephemeral');
      const fence = { server: SERVER, session: tserver.sessionId };
      await waitFor(async () => {
        const status = await rpc.call<{ tservers: Record<string, string> }>('GET', '/v1/status');
        return status.tservers[SERVER] === fence.session;
      }, 'the manager to see the tablet server');

      proxy.refuse(true);
      proxy.dropConnections();
      await manager.waitForLog((l) => l.msg === 'manager state' && l.to === 'suspended', 5_000);
      // The tablet server's session ends while the manager cannot see it.
      await tserver.close();
      const outcomes: string[] = [];
      let writes = 0;
      let stop = false;
      const writer = (async () => {
        while (!stop) {
          const n = writes++;
          const outcome = await rpc
            .post<{ results: { applied: boolean }[] }>(
              '/v1/meta/mutate',
              { mutations: [{ puts: [{ row: `probe${n}`, col: 'c', value: 'v' }] }], fence },
              { idempotent: false, attempts: 1 },
            )
            .then(
              ({ results }) => (results[0]?.applied ? 'applied' : 'not applied'),
              (err: unknown) => (err instanceof ExcError ? err.code : String(err)),
            );
          outcomes.push(outcome);
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await new Promise((r) => setTimeout(r, 300));
      proxy.delayAnswers(400);
      proxy.refuse(false);
      await manager.waitForLog(
        (l) => l.msg === 'manager state' && l.from === 'suspended' && l.to === 'active',
        10_000,
      );
      await new Promise((r) => setTimeout(r, 1_000));
      stop = true;
      await writer;

      expect(outcomes.filter((o) => o === 'applied')).toEqual([]);
      expect(new Set(outcomes)).toEqual(new Set(['UNAVAILABLE', 'FENCED']));
      expect(outcomes.at(-1)).toBe('FENCED');
      const { cols } = await rpc.post<{ cols: Record<string, string> }>('/v1/meta/row', { row: 'probe0' });
      expect(cols).toEqual({});
    } finally {
      await tserver.close();
      await proxy.stop();
    }
  });
});
