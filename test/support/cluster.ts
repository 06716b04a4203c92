/**
 * A cluster under test: an instance root in the suite's ZooKeeper, a secret, a data directory, and
 * helpers to start the project's real processes against them and to talk to the cluster as an admin.
 *
 *   const zk = useZooKeeper();
 *   const procs = useProcesses();
 *   const cluster = useCluster(zk, procs);
 *   const manager = await cluster().startManager();
 *   const meta = await cluster().meta();
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { MetaClient } from '../../src/meta/client.js';
import { RpcClient } from '../../src/rpc/client.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../../src/zk/index.js';
import {
  runCli,
  type LogLine,
  type ManagedProcess,
  type ProcessGroup,
  type StartOptions,
} from './processes.js';
import { tempDir, uniqueName } from './tmp.js';
import type { TestZooKeeper } from './zookeeper.js';

export interface ClusterOptions {
  /** Session timeout of the cluster's processes (default 1500 ms: failures show quickly). */
  sessionTimeoutMs?: number;
  /** Extra environment for every process (a function: evaluated when a process starts, e.g. S3 settings). */
  env?: Record<string, string> | (() => Record<string, string>);
}

export class TestCluster {
  readonly secret = `test-secret-${uniqueName('')}-0123456789`;
  readonly root = `/${uniqueName('exc')}`;
  readonly layout = new ZkLayout(this.root);
  readonly dataDir: string;
  private readonly sessions: ZkSession[] = [];
  private readonly metas: MetaClient[] = [];

  constructor(
    readonly zk: TestZooKeeper,
    readonly procs: ProcessGroup,
    dir: string,
    readonly options: ClusterOptions = {},
  ) {
    this.dataDir = dir;
    mkdirSync(join(dir, 'store'), { recursive: true });
  }

  /** The local object store directory every process of the cluster uses. */
  get storePath(): string {
    return join(this.dataDir, 'store');
  }

  get sessionTimeoutMs(): number {
    return this.options.sessionTimeoutMs ?? 1_500;
  }

  /** Environment for a process of this cluster. */
  env(extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
    return {
      EXC_ZK: this.zk.connectString,
      EXC_ZK_ROOT: this.root,
      EXC_SECRET: this.secret,
      EXC_ZK_SESSION_TIMEOUT_MS: String(this.sessionTimeoutMs),
      EXC_DATA_DIR: join(this.dataDir, 'manager'),
      EXC_STORE: `file://${this.storePath}`,
      EXC_PORT: '0',
      EXC_GC_INTERVAL_MS: '3600000',
      ...(typeof this.options.env === 'function' ? this.options.env() : this.options.env),
      ...extra,
    };
  }

  /** Starts a manager; resolves once it is active, or standing by when `standby` is set. */
  async startManager(
    options: { name?: string; standby?: boolean; env?: Record<string, string | undefined> } = {},
  ): Promise<ManagedProcess> {
    const ready = options.standby
      ? (l: LogLine) => l.msg === 'another manager is active: standing by'
      : (l: LogLine) => l.msg === 'manager active';
    return this.procs.start(options.name ?? 'manager', ['manager'], {
      env: this.env(options.env),
      readyWhen: ready,
    });
  }

  /** Starts a tablet server; resolves once it is registered. */
  startTserver(
    options: { name?: string; env?: Record<string, string | undefined> } = {},
  ): Promise<ManagedProcess> {
    return this.procs.start(options.name ?? 'tserver', ['tserver'], {
      env: this.env(options.env),
      readyWhen: (l) => l.msg === 'tablet server ready',
    });
  }

  /** Starts a compactor for `queue`; resolves once it is registered. */
  startCompactor(
    queue: string,
    options: { name?: string; args?: string[]; env?: Record<string, string | undefined> } = {},
  ): Promise<ManagedProcess> {
    return this.procs.start(
      options.name ?? `compactor-${queue}`,
      ['compactor', queue, '--long-poll', '5000', ...(options.args ?? [])],
      {
        env: this.env(options.env),
        readyWhen: (l) => l.msg === 'compactor ready',
      },
    );
  }

  /** Runs `excompact <args>` against this cluster and waits for it. */
  cli(args: string[], options: { input?: string; env?: Record<string, string | undefined> } = {}) {
    return runCli(args, {
      env: this.env(options.env),
      ...(options.input === undefined ? {} : { input: options.input }),
    });
  }

  /** Starts a process of this cluster with any arguments. */
  start(name: string, args: string[], options: StartOptions = {}): Promise<ManagedProcess> {
    return this.procs.start(name, args, { ...options, env: this.env(options.env) });
  }

  /** An authenticated admin session on the cluster's root (closed after the test). */
  async session(): Promise<ZkSession> {
    const session = await ZkSession.connect({
      connectString: this.zk.connectString,
      sessionTimeoutMs: 5_000,
      auth: digestAuthFromSecret(this.secret),
    });
    this.sessions.push(session);
    await ensureLayout(session, this.layout);
    return session;
  }

  /** A metadata client that finds the active manager through ZooKeeper. */
  async meta(): Promise<MetaClient> {
    const meta = new MetaClient({
      session: await this.session(),
      layout: this.layout,
      secret: this.secret,
      logger: silentLogger(),
      timeoutMs: 10_000,
    });
    this.metas.push(meta);
    return meta;
  }

  /** A signed client for one process's HTTP API (e.g. a tablet server). */
  client(url: string): RpcClient {
    return new RpcClient({ baseUrl: url, secret: this.secret, timeoutMs: 10_000 });
  }

  async closeSessions(): Promise<void> {
    await Promise.all(this.sessions.splice(0).map((s) => s.close()));
  }
}

/** A fresh cluster (root, secret, data directory) for every test of the enclosing suite. */
export function useCluster(
  zk: () => TestZooKeeper,
  procs: ProcessGroup,
  options: ClusterOptions = {},
): () => TestCluster {
  let cluster: TestCluster | undefined;
  const dirs: ReturnType<typeof tempDir>[] = [];
  beforeEach(() => {
    const dir = tempDir('cluster');
    dirs.push(dir);
    cluster = new TestCluster(zk(), procs, dir.path, options);
  });
  afterEach(async () => {
    await procs.stopAll();
    await cluster?.closeSessions();
  });
  afterAll(() => {
    for (const dir of dirs) dir.cleanup();
  });
  return () => {
    if (!cluster) throw new Error('the cluster exists only inside a test');
    return cluster;
  };
}
