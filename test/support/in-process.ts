/**
 * The project's server processes run inside the test rather than spawned, against a {@link TestCluster}'s
 * real ZooKeeper and its (spawned) manager and tablet servers: a test can then reach into one — spy on a
 * call it makes, route its ZooKeeper connection through a {@link TcpProxy} — and read its log lines.
 *
 *   const c = await inProcessCompactor(cluster(), 'q', { zk: proxy.address });
 *   await c.started;
 *   ...
 *   await c.close();
 */
import { Writable } from 'node:stream';
import { Compactor, type CompactorOptions } from '../../src/compactor/compactor.js';
import { loadConfig } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/log.js';
import { TabletServer, type TserverOptions } from '../../src/tserver/tserver.js';
import type { TestCluster } from './cluster.js';
import type { LogLine } from './process-group.js';
import { waitFor } from './waits.js';

/** A logger whose JSON lines are kept, parsed, for the test to look at. */
export interface CapturedLog {
  logger: Logger;
  lines: LogLine[];
  /** Resolves with the first line (seen or to come) that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
}

export function captureLog(name: string): CapturedLog {
  const lines: LogLine[] = [];
  const destination = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      for (const text of chunk.toString().split('\n')) if (text) lines.push(JSON.parse(text) as LogLine);
      done();
    },
  });
  return {
    logger: createLogger({ name, level: 'debug', destination }),
    lines,
    waitForLog: (match, timeoutMs = 15_000) =>
      waitFor(async () => lines.find(match), `a ${name} log line`, timeoutMs),
  };
}

/** Options every in-process server of `cluster` gets; `zk` replaces its ZooKeeper connect string (a proxy). */
function serverOptions(cluster: TestCluster, zk?: string) {
  const config = loadConfig({ env: cluster.env(zk ? { EXC_ZK: zk } : {}) });
  return { ...config, secret: cluster.secret, store: cluster.store() };
}

export type InProcess<T> = CapturedLog & { server: T; close(): Promise<void> };

/** A compactor of `queue`, not started: call `server.start()` (a test may spy on it first). */
export function inProcessCompactor(
  cluster: TestCluster,
  queue: string,
  options: Partial<CompactorOptions> = {},
): InProcess<Compactor> {
  const log = captureLog('compactor');
  const server = new Compactor({
    ...serverOptions(cluster, options.zk),
    logger: log.logger,
    queue,
    concurrency: 1,
    longPollMs: 1_000,
    graceMs: 0,
    progressEveryMs: 500,
    ...options,
  });
  return { ...log, server, close: () => server.close() };
}

/** A tablet server (not started: call `server.start()`). */
export function inProcessTserver(
  cluster: TestCluster,
  options: Partial<TserverOptions> = {},
): InProcess<TabletServer> {
  const log = captureLog('tserver');
  const server = new TabletServer({
    ...serverOptions(cluster, options.zk),
    logger: log.logger,
    stallTimeoutMs: 0,
    ...options,
  });
  return { ...log, server, close: () => server.close() };
}
