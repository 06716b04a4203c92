/**
 * A session declared lost locally (no server answered for a whole timeout) is not always expired on the
 * server: a ZooKeeper leader election — and, with one server, a restart — starts every session's timer
 * again, so the old session, and its ephemeral nodes, would live on for another full timeout after the
 * ensemble is back: a ghost holding the manager node, a tablet server's address, a dead compactor's
 * registration. The session ends it as soon as a server answers again.
 *
 * The same for a session closed while no server answered (a process stopping during a ZooKeeper
 * outage): the close never reached a server.
 *
 * The server restart is the honest way to get there with one server: it reloads the sessions from its
 * log with fresh timers, exactly as a newly elected leader does.
 */
import { describe, expect, it } from 'vitest';
import { startEmbeddedZooKeeper, type EmbeddedZooKeeper } from '../../src/zk/embedded.js';
import { ZkSession, type ZkLossReason } from '../../src/zk/index.js';
import { tempDir, waitFor } from '../support/index.js';

const TIMEOUT_MS = 6_000;

function start(dir: string, port?: number): Promise<EmbeddedZooKeeper> {
  return startEmbeddedZooKeeper({
    dataDir: dir,
    tickTimeMs: 100,
    minSessionTimeoutMs: 200,
    maxSessionTimeoutMs: 20_000,
    ...(port ? { port } : {}),
  });
}

describe('zk session - lost while the server still keeps it', () => {
  it(
    'ghost - a session declared lost is ended once a server answers again: its ephemeral node goes at once, not a timeout later',
    { timeout: 60_000 },
    async () => {
      const dir = tempDir('zk-ghost');
      let server = await start(dir.path);
      const sessions: ZkSession[] = [];
      try {
        const victim = await ZkSession.connect({
          connectString: server.connectString,
          sessionTimeoutMs: TIMEOUT_MS,
        });
        sessions.push(victim);
        expect(victim.sessionTimeoutMs).toBe(TIMEOUT_MS);
        await victim.create('/ghost', 'x', 'ephemeral');
        const lost = new Promise<ZkLossReason>((resolve) => victim.once('lost', resolve));

        // The server goes away (keeping the session in its log) for longer than the timeout.
        await server.stop();
        expect(await lost).toBe('suspended-too-long');
        // Back, with every session it knew given a fresh timeout.
        server = await start(dir.path, server.port);
        const back = Date.now();
        const observer = await ZkSession.connect({
          connectString: server.connectString,
          sessionTimeoutMs: 2_000,
        });
        sessions.push(observer);
        await waitFor(
          async () => (await observer.exists('/ghost')) === null,
          'the lost session to be ended',
          TIMEOUT_MS + 5_000,
          50,
        );
        // Well within the timeout the server would otherwise have waited.
        expect(Date.now() - back).toBeLessThan(TIMEOUT_MS / 2);
      } finally {
        await Promise.all(sessions.map((s) => s.close()));
        await server.stop();
        dir.cleanup();
      }
    },
  );

  it(
    'ghost - a session closed while no server answered is ended once one does (found by a review)',
    { timeout: 60_000 },
    async () => {
      const dir = tempDir('zk-ghost-close');
      let server = await start(dir.path);
      const sessions: ZkSession[] = [];
      try {
        const victim = await ZkSession.connect({
          connectString: server.connectString,
          sessionTimeoutMs: TIMEOUT_MS,
        });
        await victim.create('/ghost', 'x', 'ephemeral');
        const suspended = new Promise<void>((resolve) => victim.once('suspended', () => resolve()));
        await server.stop();
        await suspended;
        // Stopping (SIGTERM) while ZooKeeper is away: the close cannot reach a server.
        await victim.close();
        server = await start(dir.path, server.port);
        const back = Date.now();
        const observer = await ZkSession.connect({
          connectString: server.connectString,
          sessionTimeoutMs: 2_000,
        });
        sessions.push(observer);
        await waitFor(
          async () => (await observer.exists('/ghost')) === null,
          'the closed session to be ended',
          TIMEOUT_MS + 5_000,
          50,
        );
        expect(Date.now() - back).toBeLessThan(TIMEOUT_MS / 2);
      } finally {
        await Promise.all(sessions.map((s) => s.close()));
        await server.stop();
        dir.cleanup();
      }
    },
  );
});
