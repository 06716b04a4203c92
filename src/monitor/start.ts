/**
 * Assembles the monitor from a cluster connection: the snapshot reader (signed calls to the manager and
 * to each compactor's status route) and the web server. Used by `excompact monitor` and `excompact local`.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import { RpcClient } from '../rpc/client.js';
import { MonitorServer, isLoopback } from './server.js';
import { SnapshotReader, type CompactorStatusAnswer, type ManagerCall } from './snapshot.js';

export interface StartMonitorOptions {
  meta: MetaClient;
  /** The instance secret: signs the calls to the compactors (the manager's are signed by `meta`). */
  secret: string;
  host: string;
  port: number;
  logger: Logger;
  /** The login token when binding beyond loopback (default: a random one, printed in `login`). */
  token?: string;
  pollMs?: number;
}

export interface RunningMonitor {
  url: string;
  /** Beyond loopback: the link that logs a browser in (it holds the token). */
  login: string | undefined;
  close(): Promise<void>;
}

export async function startMonitor(options: StartMonitorOptions): Promise<RunningMonitor> {
  const { meta, secret } = options;
  const call: ManagerCall = (method, path, body) => meta.call(method, path, body);
  const clients = new Map<string, RpcClient>();
  const compactorStatus = (url: string): Promise<CompactorStatusAnswer> => {
    let client = clients.get(url);
    if (!client) {
      // A compactor that does not answer within 2 s is shown without its live progress this time.
      client = new RpcClient({ baseUrl: url, secret, timeoutMs: 2_000, attempts: 1 });
      clients.set(url, client);
    }
    return client.get<CompactorStatusAnswer>('/v1/status');
  };
  const remote = !isLoopback(options.host);
  const token = remote ? (options.token ?? randomBytes(24).toString('base64url')) : undefined;
  const server = new MonitorServer({
    host: options.host,
    port: options.port,
    ...(token ? { token } : {}),
    reader: new SnapshotReader(call, compactorStatus),
    call,
    log: options.logger.child({ component: 'monitor' }),
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  const url = await server.start();
  return {
    url,
    login: token ? `${url}login?token=${encodeURIComponent(token)}` : undefined,
    close: () => server.close(),
  };
}
