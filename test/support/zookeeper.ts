/**
 * A real ZooKeeper server per suite: ZooKeeperServerMain in a temp data dir on a free loopback port with
 * a small tickTime and the four-letter words enabled, verified to be ours before use (see
 * src/zk/embedded.ts), always stopped.
 *
 *   const zk = useZooKeeper();          // in a describe block: started in beforeAll, stopped in afterAll
 *   zk().connectString
 */
import { afterAll, beforeAll } from 'vitest';
import { startEmbeddedZooKeeper, type EmbeddedZooKeeper } from '../../src/zk/embedded.js';
import { tempDir } from './tmp.js';

export interface TestZooKeeper extends EmbeddedZooKeeper {
  /** SIGSTOP the server: it stops answering but keeps its TCP connections open. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

export interface TestZooKeeperOptions {
  /** Default 100 ms: session timeouts can then range from 200 ms to 20 s. */
  tickTimeMs?: number;
}

export async function startTestZooKeeper(options: TestZooKeeperOptions = {}): Promise<TestZooKeeper> {
  const dir = tempDir('zk');
  const tick = options.tickTimeMs ?? 100;
  const server = await startEmbeddedZooKeeper({
    dataDir: dir.path,
    tickTimeMs: tick,
    minSessionTimeoutMs: 2 * tick,
    maxSessionTimeoutMs: 200 * tick,
  });
  const stop = server.stop;
  return {
    ...server,
    pause: () => process.kill(server.pid, 'SIGSTOP'),
    resume: () => process.kill(server.pid, 'SIGCONT'),
    stop: async () => {
      await stop();
      dir.cleanup();
    },
  };
}

/** Starts a ZooKeeper for the enclosing suite; the returned getter is valid inside tests and hooks. */
export function useZooKeeper(options: TestZooKeeperOptions = {}): () => TestZooKeeper {
  let server: TestZooKeeper | undefined;
  beforeAll(async () => {
    server = await startTestZooKeeper(options);
  });
  afterAll(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error('ZooKeeper is not started: call useZooKeeper() inside a describe block');
    return server;
  };
}
