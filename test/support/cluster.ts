/**
 * A cluster under test: an instance root in the suite's ZooKeeper, a secret, a data directory, and
 * helpers to start the project's real processes against them and to talk to the cluster as an admin.
 *
 *   const zk = useZooKeeper();
 *   const procs = useProcesses();
 *   const cluster = useCluster(zk, procs);
 *   const manager = await cluster().startManager();
 *   const meta = await cluster().meta();
 *
 *   // or, for a test about compactions: manager, tablet server, a queue, a table routed to it
 *   const s = await cluster().startWithTable({ table: 't', queue: 'q', splits: ['m'] });
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { MetaClient } from '../../src/meta/client.js';
import type { TabletView } from '../../src/meta/views.js';
import { createQueue, type QueueInfo } from '../../src/queue/registry.js';
import { rpcKey, signRequest } from '../../src/rpc/auth.js';
import { RpcClient } from '../../src/rpc/client.js';
import { openObjectStore, type ObjectStore } from '../../src/storage/index.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../../src/zk/index.js';
import {
  runCli,
  type LogLine,
  type ManagedProcess,
  type ProcessGroup,
  type StartOptions,
} from './processes.js';
import { tempDir, uniqueName } from './tmp.js';
import { waitFor } from './waits.js';
import type { TestZooKeeper } from './zookeeper.js';

export interface ClusterOptions {
  /** Session timeout of the cluster's processes (default 1500 ms: failures show quickly). */
  sessionTimeoutMs?: number;
  /** Extra environment for every process (a function: evaluated when a process starts, e.g. S3 settings). */
  env?: Record<string, string> | (() => Record<string, string>);
}

/** A tablet server process, with the `host:port` it registered under (its name in `loc`). */
export type TserverProcess = ManagedProcess & { server: string };

/** A compactor process, with its ZooKeeper node and the URL of its status server. */
export type CompactorProcess = ManagedProcess & { compactor: string; status: string };

export interface TableSetupOptions {
  /** Default 'TABLE1'. */
  table?: string;
  /** The queue the table's compactions are routed to, created with 4 bins (default 'size256M'). */
  queue?: string;
  splits?: string[];
  /** More table configuration, beside the routing to `queue`. */
  config?: Record<string, unknown>;
  /** Extra environment for the tablet server. */
  tserverEnv?: Record<string, string | undefined>;
}

/** What {@link TestCluster.startWithTable} started. */
export interface TableSetup {
  table: string;
  queue: QueueInfo;
  meta: MetaClient;
  client: ExcClient;
  tserver: TserverProcess;
  /** The table's tablets, every one hosted by `tserver`. */
  tablets: TabletView[];
}

export class TestCluster {
  readonly secret = `test-secret-${uniqueName('')}-0123456789`;
  readonly root = `/${uniqueName('exc')}`;
  readonly layout = new ZkLayout(this.root);
  readonly dataDir: string;
  private readonly sessions: ZkSession[] = [];
  private readonly metas: MetaClient[] = [];
  private readonly stores: ObjectStore[] = [];

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
  async startTserver(
    options: { name?: string; env?: Record<string, string | undefined> } = {},
  ): Promise<TserverProcess> {
    const ready = (l: LogLine) => l.msg === 'tablet server ready';
    const proc = await this.procs.start(options.name ?? 'tserver', ['tserver'], {
      env: this.env(options.env),
      readyWhen: ready,
    });
    const line = await proc.waitForLog(ready);
    return Object.assign(proc, { server: line.name as string });
  }

  /** Starts a compactor for `queue`; resolves once it is registered. */
  async startCompactor(
    queue: string,
    options: { name?: string; args?: string[]; env?: Record<string, string | undefined> } = {},
  ): Promise<CompactorProcess> {
    const ready = (l: LogLine) => l.msg === 'compactor ready';
    const proc = await this.procs.start(
      options.name ?? `compactor-${queue}`,
      ['compactor', queue, '--long-poll', '5000', ...(options.args ?? [])],
      { env: this.env(options.env), readyWhen: ready },
    );
    const line = await proc.waitForLog(ready);
    return Object.assign(proc, { compactor: line.compactor as string, status: line.status as string });
  }

  /**
   * Starts a manager and a tablet server, creates a queue and a table whose compactions go to it, and
   * resolves once every tablet is hosted.
   */
  async startWithTable(options: TableSetupOptions = {}): Promise<TableSetup> {
    const table = options.table ?? 'TABLE1';
    await this.startManager();
    const tserver = await this.startTserver({ env: options.tserverEnv });
    const queue = await createQueue(await this.session(), this.layout, options.queue ?? 'size256M', 4);
    const meta = await this.meta();
    await meta.call('POST', '/v1/tables', {
      name: table,
      splits: options.splits ?? [],
      // Uncompressed unless a test says otherwise: tests reason about the planner's size ratios from
      // batches of equal entries, which make files of equal sizes only without compression. The
      // default codec runs end to end in test/cluster/local.test.ts (excompact local).
      config: { queues: [{ queue: queue.name }], compression: 'none', ...options.config },
    });
    const client = new ExcClient({
      meta,
      secret: this.secret,
      logger: silentLogger(),
      moveTimeoutMs: 20_000,
    });
    const tablets = await waitFor(async () => {
      const t = await client.tablets(table);
      return t.every((x) => x.loc) && t;
    }, `every tablet of ${table} to be hosted`);
    return { table, queue, meta, client, tserver, tablets };
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

  /** The active manager's URL, from its ZooKeeper node (e.g. to scrape its unsigned /metrics). */
  async managerUrl(): Promise<string> {
    const session = await this.session();
    const { host, port } = JSON.parse((await session.get(this.layout.manager)).data.toString()) as {
      host: string;
      port: number;
    };
    return `http://${host}:${port}`;
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

  /**
   * A correctly signed POST of any bytes (what {@link client} cannot send: a body that is not JSON).
   * Resolves with the status and the error the server answered, if any.
   */
  async postRaw(
    url: string,
    path: string,
    body: string | Buffer,
  ): Promise<{ status: number; error?: { code: string; message: string } }> {
    const bytes = Buffer.from(body);
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...signRequest(rpcKey(this.secret), { method: 'POST', host: new URL(url).host, path, body: bytes }),
      },
      body: bytes,
    });
    const json = (await res.json().catch(() => ({}))) as { error?: { code: string; message: string } };
    return { status: res.status, ...(json.error ? { error: json.error } : {}) };
  }

  /** The object store the cluster's processes use (local or S3, from the same settings); closed after the test. */
  store(): ObjectStore {
    const store = openObjectStore(loadConfig({ env: this.env() }));
    this.stores.push(store);
    return store;
  }

  /** Closes the sessions and stores the test opened. */
  async closeSessions(): Promise<void> {
    await Promise.all([
      ...this.sessions.splice(0).map((s) => s.close()),
      ...this.stores.splice(0).map((s) => s.close()),
    ]);
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
