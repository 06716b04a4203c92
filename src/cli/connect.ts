/**
 * How client commands (admin, ingest, scan) reach a cluster: connection settings from flags, then the
 * environment, then a config file; ZooKeeper to find the active manager; the manager for everything else.
 * A manager failover is ridden through (MetaClient); a cluster unreachable for longer than
 * EXC_MANAGER_FAILOVER_MS fails with what was tried (exit code 2).
 */
import type { Command } from 'commander';
import type { ExcClient } from '../client/client.js';
import { loadConfig, requireSecret, type Config, type SettingKey } from '../config.js';
import { ExcError } from '../errors.js';
import type { MetaClient } from '../meta/client.js';
import type { ZkLayout, ZkSession } from '../zk/index.js';

/** Connection flags every client command accepts (defined once on the root program). */
export interface ConnectionFlags {
  zk?: string;
  zkRoot?: string;
  secretFile?: string;
  configFile?: string;
}

export function connectionOptions(program: Command): Command {
  return program
    .option('--zk <connect>', 'ZooKeeper connect string (EXC_ZK, default 127.0.0.1:2181)')
    .option('--zk-root <path>', 'root znode of the instance (EXC_ZK_ROOT, default /excompact)')
    .option('--secret-file <file>', 'file holding the instance secret (EXC_SECRET_FILE or EXC_SECRET)')
    .option('--config-file <file>', 'JSON config file (EXC_CONFIG)');
}

export interface Cluster {
  config: Config;
  session: ZkSession;
  layout: ZkLayout;
  meta: MetaClient;
  client: ExcClient;
  close(): Promise<void>;
}

/** The configuration with the connection flags (and any `overrides`) applied. */
export function configFrom(command: Command, overrides: Partial<Record<SettingKey, unknown>> = {}): Config {
  const flags = command.optsWithGlobals<ConnectionFlags>();
  return loadConfig({
    ...(flags.configFile ? { file: flags.configFile } : {}),
    overrides: { zk: flags.zk, zkRoot: flags.zkRoot, secretFile: flags.secretFile, ...overrides },
  });
}

export async function connect(command: Command): Promise<Cluster> {
  const config = configFrom(command);
  const secret = requireSecret(config);
  // Loaded here, not above: building the command line (and --help) must not pay for the client stack.
  const [{ ExcClient }, { silentLogger }, { MetaClient }, { ZkLayout, ZkSession, digestAuthFromSecret }] =
    await Promise.all([
      import('../client/client.js'),
      import('../log.js'),
      import('../meta/client.js'),
      import('../zk/index.js'),
    ]);
  const open = () =>
    ZkSession.connect({
      connectString: config.zk,
      sessionTimeoutMs: config.zkSessionTimeoutMs,
      connectTimeoutMs: 5_000,
      auth: digestAuthFromSecret(secret),
    });
  let session = await open();
  let closed = false;
  const layout = new ZkLayout(config.zkRoot);
  const logger = silentLogger();
  const meta = new MetaClient({
    session,
    // A command that outlives its session (following a compaction, a long ingest, ZooKeeper down for
    // longer than the session timeout) goes on with a new one.
    reconnect: async () => {
      const next = await open();
      if (closed) {
        await next.close();
        throw new ExcError('SHUTTING_DOWN', 'the command is over');
      }
      const lost = session;
      session = next;
      await lost.close().catch(() => undefined);
      return next;
    },
    layout,
    secret,
    logger,
    timeoutMs: config.rpcTimeoutMs,
    // Long enough to ride through a failover (a session timeout and a takeover): a call that meets one
    // is not an error, and one that outlasts this fails with what it tried (exit 2).
    failoverMs: config.managerFailoverMs,
  });
  const client = new ExcClient({ meta, secret, logger });
  return {
    config,
    get session() {
      return session;
    },
    layout,
    meta,
    client,
    close: async () => {
      closed = true;
      meta.close();
      await session.close();
    },
  };
}

/** Runs `fn` with a connection, always closing it. */
export async function withCluster<T>(command: Command, fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = await connect(command);
  try {
    return await fn(cluster);
  } finally {
    await cluster.close();
  }
}
