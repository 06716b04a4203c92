/**
 * The chaos run's cluster: the compose topology at full strength on loopback — a ZooKeeper ensemble of
 * three, an S3 server behind a fault proxy, an active and a standby manager, three tablet servers and a
 * pool of compactors per queue — as real processes in slots.
 *
 * A slot is a role that always has one process: when its process exits the slot is restarted, after the
 * delay the fault asked for (or at once). Every exit is judged: a fault announces the exit it causes
 * ({@link Slot.expect}); an exit nobody announced is an unexpected exit, a violation.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import { retry } from '../src/retry.js';
import { MetaClient } from '../src/meta/client.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/meta/embedded-postgres.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../src/zk/index.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../test/support/ensemble.js';
import { FaultProxy } from '../test/support/fault-proxy.js';
import { startProxy } from '../test/support/proxy.js';
import { ProcessGroup, runCli, type LogLine, type ManagedProcess } from '../test/support/process-group.js';
import { startTestS3, type TestS3 } from '../test/support/s3-server.js';
import type { ChaosLog } from './report.js';
import type { Role, Slot, UnexpectedExit } from './slots.js';

export type { ExpectedExit, Role, Slot, UnexpectedExit } from './slots.js';

export interface ChaosClusterOptions {
  dir: string;
  sessionTimeoutMs: number;
  gcGraceMs: number;
  /** Each queue, its compactors, and their extra command-line arguments. */
  queues: { name: string; bins: number; compactors: number; args?: string[] }[];
  tservers: number;
  /** Where the managers keep the metadata store (default SQLite in the run directory). */
  meta?: 'sqlite' | 'postgres';
  log: ChaosLog;
}

const READY: Record<Role, (l: LogLine) => boolean> = {
  manager: (l) => l.msg === 'manager active' || l.msg === 'another manager is active: standing by',
  tserver: (l) => l.msg === 'tablet server ready',
  compactor: (l) => l.msg === 'compactor ready',
};

export class ChaosCluster {
  readonly secret = `chaos-secret-${Math.random().toString(36).slice(2)}-0123456789`;
  readonly root = '/chaos';
  readonly layout = new ZkLayout(this.root);
  readonly slots: Slot[] = [];
  readonly unexpected: UnexpectedExit[] = [];
  readonly procs: ProcessGroup;
  ensemble!: ZooKeeperEnsemble;
  s3!: TestS3;
  /** The metadata store's database, with `meta: 'postgres'`. */
  postgres?: { server: EmbeddedPostgres; url: string };
  proxy!: FaultProxy;
  /** The sick compactor's way to the object store: every PUT refused. */
  sickProxy!: FaultProxy;
  session!: ZkSession;
  meta!: MetaClient;
  client!: ExcClient;
  private stopping = false;
  private readonly restarts = new Set<NodeJS.Timeout>();

  constructor(readonly options: ChaosClusterOptions) {
    mkdirSync(join(options.dir, 'logs'), { recursive: true });
    this.procs = new ProcessGroup({ dir: join(options.dir, 'logs'), retainLines: 50 });
  }

  get log(): ChaosLog {
    return this.options.log;
  }

  /** Environment of every process of the cluster (a slot's reaches ZooKeeper through its own proxies). */
  env(slot?: Slot): Record<string, string> {
    return {
      EXC_ZK: slot?.zkProxies ? slot.zkProxies.map((p) => p.address).join(',') : this.ensemble.connectString,
      EXC_ZK_ROOT: this.root,
      EXC_SECRET: this.secret,
      EXC_ZK_SESSION_TIMEOUT_MS: String(this.options.sessionTimeoutMs),
      EXC_DATA_DIR: join(this.options.dir, 'manager'),
      ...(this.postgres ? { EXC_META: this.postgres.url } : {}),
      ...this.s3.env,
      EXC_S3_ENDPOINT: this.proxy.endpoint,
      EXC_GC_GRACE_MS: String(this.options.gcGraceMs),
      EXC_GC_INTERVAL_MS: '5000',
      // Replaced files are collected every cycle; leftovers of the faults are listed for once a minute.
      EXC_GC_SWEEP_INTERVAL_MS: '60000',
      EXC_STALL_TIMEOUT_MS: '60000',
      // A merge lets running compactions finish for 3 s, then cancels them: merges keep coming.
      EXC_MERGE_WAIT_MS: '3000',
      // Jobs of 32 KiB of input or more write their output as checkpointed parts (every 32 KiB or
      // second), and tablet servers record a checkpoint as often: the bulky table's jobs checkpoint.
      EXC_CHECKPOINT_BYTES: String(32 * 1024),
      EXC_CHECKPOINT_MS: '1000',
      EXC_LOG_LEVEL: 'info',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
  }

  async start(): Promise<void> {
    const { dir } = this.options;
    this.ensemble = await startZooKeeperEnsemble({ dir: join(dir, 'zk') });
    this.s3 = await startTestS3({ dir: join(dir, 's3') });
    if (this.options.meta === 'postgres') {
      // Not among the faults: the database is the store's durability, like the SQLite file's disk.
      // The server runs as the postgres user, which must be able to pass through the run directory (a
      // temporary directory is created 0700).
      chmodSync(dir, 0o711);
      const server = await startEmbeddedPostgres({ dir: join(dir, 'postgres'), durable: false });
      this.postgres = { server, url: await server.database('chaos') };
    }
    this.proxy = await FaultProxy.start(Number(new URL(this.s3.endpoint).port));
    this.proxy.record = false;
    this.sickProxy = await FaultProxy.start(Number(new URL(this.s3.endpoint).port));
    this.sickProxy.record = false;
    this.sickProxy.inject(
      { kind: 'status', status: 403, code: 'AccessDenied' },
      { times: Infinity, method: 'PUT' },
    );
    this.log.event('cluster', {
      zk: this.ensemble.connectString,
      s3: this.s3.endpoint,
      proxy: this.proxy.endpoint,
      meta: this.postgres ? this.postgres.url : 'sqlite',
    });

    await this.connectClient();

    for (let i = 1; i <= 2; i++) this.slots.push(this.slot(`manager-${i}`, 'manager'));
    for (let i = 1; i <= this.options.tservers; i++) this.slots.push(this.slot(`tserver-${i}`, 'tserver'));
    for (const s of this.slots) await this.launch(s);
    // One more tablet server, started by the `tserver-join` fault for a while.
    this.slots.push({
      ...this.slot(`tserver-${this.options.tservers + 1}`, 'tserver'),
      held: true,
      optional: true,
    });
    await this.cli(['admin', 'store', 'init']);
    for (const q of this.options.queues) {
      await this.cli(['admin', 'queue', 'create', q.name, '--bins', String(q.bins)]);
      for (let i = 1; i <= q.compactors; i++) {
        const s = this.slot(`compactor-${q.name}-${i}`, 'compactor', q.name);
        this.slots.push(s);
        await this.launch(s);
      }
    }
    const small = this.options.queues[0]!.name;
    this.slots.push({
      ...this.slot('compactor-sick', 'compactor', small),
      held: true,
      optional: true,
      sick: true,
    });
  }

  private slot(name: string, role: Role, queue?: string): Slot {
    return { name, role, ...(queue ? { queue } : {}), held: false, restartAfterMs: 0, starts: 0 };
  }

  /** Starts the slot's process and waits until it is ready. */
  async launch(slot: Slot): Promise<void> {
    const args =
      slot.role === 'compactor'
        ? [
            'compactor',
            slot.queue!,
            '--long-poll',
            '5000',
            ...(this.options.queues.find((q) => q.name === slot.queue)?.args ?? []),
          ]
        : [slot.role];
    slot.starts++;
    slot.zkProxies ??= await Promise.all(this.ensemble.members.map((m) => startProxy(m.clientPort)));
    if (!slot.peer) {
      const port = await fixedPort();
      slot.peer = { port, proxy: await startProxy(port) };
    }
    args.push('--port', String(slot.peer.port));
    const proc = await this.procs.start(`${slot.name}.${slot.starts}`, args, {
      env: {
        ...this.env(slot),
        EXC_ADVERTISE_PORT: String(slot.peer.proxy.port),
        ...(slot.sick
          ? { EXC_S3_ENDPOINT: this.sickProxy.endpoint, EXC_COMPACTOR_BACKOFF_MAX_MS: '1000' }
          : {}),
      },
      readyWhen: READY[slot.role],
      readyTimeoutMs: 60_000,
    });
    slot.proc = proc;
    slot.readyAt = Date.now();
    delete slot.expect;
    // Only the slot's latest processes are kept in the group (a long run starts thousands).
    if (this.procs.procs.length > 200) this.procs.procs.splice(0, this.procs.procs.length - 200);
    const identify = (l: LogLine): void => {
      if (slot.proc !== proc) return;
      if (
        slot.role === 'compactor' &&
        typeof l.compactor === 'string' &&
        /ready|registered/.test(l.msg ?? '')
      )
        slot.identity = l.compactor;
      if (slot.role === 'tserver' && l.msg === 'tablet server ready') slot.identity = String(l.name);
      if (slot.role === 'manager' && l.msg === 'manager listening') slot.identity = String(l.url);
    };
    for (const l of proc.lines) identify(l);
    proc.onLine(identify);
    this.log.event('started', { slot: slot.name, pid: proc.pid, identity: slot.identity ?? null });
    void proc.exit.then(({ code, signal }) => this.onExit(slot, proc, code, signal));
  }

  private onExit(slot: Slot, proc: ManagedProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (slot.proc !== proc) return;
    slot.proc = undefined;
    const now = Date.now();
    const e = slot.expect;
    // The sick compactor exits 5 by itself, as a compactor does after failing job after job.
    const expected =
      (slot.sick === true && code === 5) ||
      (e !== undefined &&
        now <= e.until &&
        (e.codes.includes(code) || (signal !== null && e.signals.includes(signal))));
    this.log.event(
      'exited',
      { slot: slot.name, pid: proc.pid, code, signal, expected, why: e?.why ?? null },
      expected
        ? undefined
        : `UNEXPECTED EXIT of ${slot.name} (code ${code}, signal ${signal}); log ${proc.logFile}`,
    );
    if (!expected) {
      this.unexpected.push({ slot: slot.name, code, signal, at: now, log: proc.logFile });
    }
    delete slot.expect;
    if (!this.stopping && !slot.held) this.scheduleRestart(slot);
  }

  /** Starts the slot again after its restart delay (retrying a start that fails). */
  scheduleRestart(slot: Slot, delayMs = slot.restartAfterMs): void {
    const timer = setTimeout(() => {
      this.restarts.delete(timer);
      if (this.stopping || slot.held || slot.proc) return;
      this.launch(slot).catch((err: unknown) => {
        this.log.event('restart-failed', { slot: slot.name, err: String(err).slice(0, 500) });
        this.scheduleRestart(slot, 2_000);
      });
    }, delayMs);
    this.restarts.add(timer);
    slot.restartAfterMs = 0;
  }

  /** Lets a held slot run again. */
  release(slot: Slot, delayMs = 0): void {
    slot.held = false;
    if (!slot.proc) this.scheduleRestart(slot, delayMs);
  }

  byRole(role: Role, queue?: string): Slot[] {
    return this.slots.filter((s) => s.role === role && (queue === undefined || s.queue === queue));
  }

  /** The slot of the active manager, read from its node in ZooKeeper. */
  async activeManager(): Promise<Slot | undefined> {
    const node = await this.session.get(this.layout.manager).catch(() => undefined);
    if (!node) return undefined;
    const { host, port } = JSON.parse(node.data.toString('utf8')) as { host: string; port: number };
    return this.byRole('manager').find((s) => s.proc && s.identity === `http://${host}:${port}`);
  }

  /**
   * Runs `excompact <args>` against the cluster; rejects with its output when it exits with another code
   * than `okCodes` (default 0).
   */
  async cli(args: string[], options: { timeoutMs?: number; okCodes?: number[] } = {}): Promise<string> {
    const r = await runCli(args, { env: this.env(), timeoutMs: options.timeoutMs ?? 120_000 });
    if (!(options.okCodes ?? [0]).includes(r.code ?? -1)) {
      throw new Error(`excompact ${args.join(' ')} exited ${r.code}: ${r.stderr.trim() || r.stdout.trim()}`);
    }
    return r.stdout;
  }

  /** Every slot is up and has been for a moment. */
  settled(forMs = 0): boolean {
    const now = Date.now();
    return this.slots.every(
      (s) =>
        (s.optional && s.held && !s.proc) ||
        (s.proc?.running && s.readyAt !== undefined && now - s.readyAt >= forMs),
    );
  }

  /** SIGTERM to every process of a role; each must exit 0 in time (otherwise it is killed and counted). */
  async stopRole(role: Role): Promise<void> {
    await Promise.all(
      this.byRole(role).map(async (s) => {
        s.held = true;
        const proc = s.proc;
        if (!proc) return;
        s.expect = { codes: [0], signals: [], until: Infinity, why: 'SIGTERM at the end of the run' };
        await proc.terminate(30_000).catch(() => proc.kill());
      }),
    );
  }

  /**
   * The harness's own ZooKeeper session and clients. A long-lived client has to outlive its session as the
   * servers do: when the session is lost (the ensemble unreachable for longer than its timeout on a
   * loaded machine, say), a new one is opened and the clients rebuilt on it; every part of the run reaches
   * them through this cluster, so they pick up the new ones.
   */
  private async connectClient(): Promise<void> {
    const session = await ZkSession.connect({
      connectString: this.ensemble.connectString,
      sessionTimeoutMs: 10_000,
      auth: digestAuthFromSecret(this.secret),
    });
    try {
      await ensureLayout(session, this.layout);
    } catch (err) {
      await session.close().catch(() => undefined);
      throw err;
    }
    const old = this.meta;
    this.session = session;
    this.meta = new MetaClient({
      session,
      layout: this.layout,
      secret: this.secret,
      logger: silentLogger(),
      failoverMs: 120_000,
    });
    this.client = new ExcClient({
      meta: this.meta,
      secret: this.secret,
      logger: silentLogger(),
      moveTimeoutMs: 60_000,
    });
    old?.close();
    session.on('lost', (reason) => {
      if (this.stopping || session !== this.session) return;
      this.log.event(
        'harness-session-lost',
        { reason },
        `the harness's ZooKeeper session was lost (${reason}): reconnecting`,
      );
      void retry(() => this.connectClient(), {
        attempts: Infinity,
        baseMs: 200,
        maxMs: 5_000,
        retryOn: () => !this.stopping,
      }).catch(() => undefined);
    });
  }

  /** Stops everything: compactors first (they release their jobs), then tablet servers, then managers. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.restarts) clearTimeout(t);
    for (const role of ['compactor', 'tserver', 'manager'] as const) await this.stopRole(role);
    await this.procs.stopAll();
    for (const s of this.slots) {
      for (const p of [...(s.zkProxies ?? []), ...(s.peer ? [s.peer.proxy] : [])])
        await p.stop().catch(() => undefined);
    }
    await this.session?.close().catch(() => undefined);
    await this.proxy?.stop().catch(() => undefined);
    await this.sickProxy?.stop().catch(() => undefined);
    await this.s3?.stop().catch(() => undefined);
    await this.postgres?.server.stop().catch(() => undefined);
    await this.ensemble?.stop().catch(() => undefined);
  }
}

/**
 * A free port below the kernel's ephemeral range, for a slot's processes to listen on one after the other:
 * a port from the ephemeral range could be taken by an outgoing connection while the slot restarts.
 */
async function fixedPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(false));
      probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
}
