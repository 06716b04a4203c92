/**
 * The manager process: owns the metadata store, assigns tablets, collects garbage, serves the admin API.
 *
 * Its life, in one place ({@link MANAGER_LIFECYCLE}):
 *
 *   connecting → standby → active ⇄ suspended
 *                   │        │         │
 *                   ▼        ▼         ▼
 *                expired → rejoining → standby → …
 *   standby → suspended (took the store over while disconnected, or after a disconnection)
 *   any → stopping → stopped
 *
 * A manager listens at once (answering NOT_MANAGER while not active), then waits in the election for the
 * manager node; once it holds it, it takes the store over (fencing any older holder by epoch) and is
 * active (active.ts). While disconnected from ZooKeeper (suspended) it keeps serving reads and writes
 * fenced by its epoch, but refuses, unapplied, the tablet servers' writes whose session it cannot check,
 * until it is connected again and has read the live tablet servers again.
 * When its session expires it stops writing at once (its writer is closed; and a manager that took over
 * meanwhile has fenced its epoch), opens a new session and joins the election again as a standby — or
 * takes over again if no one else did. The process never exits for that.
 */
import { EventEmitter } from 'node:events';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps, type ShutdownStep } from '../lifecycle.js';
import { createRegistry } from '../metrics.js';
import { advertisedAddress } from '../net.js';
import { checkQueuesExist, readQueueMap } from '../queue/registry.js';
import { PeerClients } from '../rpc/peers.js';
import {
  connectZk,
  listen,
  ProcessState,
  serverRpc,
  type Lifecycle,
  type ServerOptions,
} from '../process.js';
import { retry } from '../retry.js';
import type { RpcServer } from '../rpc/server.js';
import { ZkLayout, ensureLayout, type ZkSession } from '../zk/index.js';
import { registerAdminApi } from './admin-api.js';
import { registerTabletAdminApi } from './tablet-admin.js';
import { registerHistoryApi } from './history-api.js';
import { registerManagerMetrics } from './manager-metrics.js';
import { pickupMetric } from './queue-metrics.js';
import { registerUserCompactionApi } from './user-compaction-api.js';
import { registerUserCompactionRequests } from './user-compaction-request.js';
import { registerIteratorApi } from './iterator-api.js';
import { registerSummariesApi } from './summaries.js';
import { activate, type ActiveManager } from './active.js';
import { registerManagerApi, type ActiveParts } from './api.js';
import { becomeManager } from './election.js';
import type { GcObjectStore } from './gc.js';

export type ManagerState = 'connecting' | 'standby' | 'active' | 'suspended' | 'expired' | 'rejoining';

export const MANAGER_LIFECYCLE: Lifecycle<ManagerState> = {
  connecting: ['standby', 'expired'],
  standby: ['active', 'suspended', 'expired'],
  active: ['suspended', 'expired'],
  suspended: ['active', 'expired'],
  expired: ['rejoining'],
  rejoining: ['standby', 'expired'],
};

export interface ManagerOptions extends ServerOptions {
  /** Directory of the metadata store (metadata.sqlite). */
  dataDir: string;
  /** `postgres://…`: the metadata store on PostgreSQL instead. */
  metaUrl?: string;
  /** For garbage collection; without it files are never deleted. */
  objectStore?: GcObjectStore;
  gcGraceMs: number;
  gcIntervalMs: number;
  /** How often the collector also lists the object store for leftovers (default: every cycle). */
  gcSweepIntervalMs?: number;
  /** Keep compaction outcome rows (`~done:`) this long. */
  outcomeRetentionMs: number;
  /** Keep at most this many outcome rows (the oldest are trimmed first). */
  outcomeMaxRows?: number;
  /** Compute the queue metrics at most this often (default 5 s; 0: at every scrape). */
  metricsCacheMs?: number;
  assignIntervalMs?: number;
  /** How long a merge lets running compactions finish (default 30 s). */
  mergeWaitMs?: number;
  /** Balancing moves under way at once (default 8; 0: no balancing). */
  balanceMoves?: number;
}

interface Events {
  state: [ManagerState | 'stopping' | 'stopped'];
}

export class Manager extends EventEmitter<Events> {
  private readonly log: Logger;
  private readonly stateCell: ProcessState<ManagerState>;
  private readonly server: RpcServer;
  private readonly layout: ZkLayout;
  private readonly peers: PeerClients;
  private readonly abort = new AbortController();
  private session: ZkSession | undefined;
  /**
   * The current session's term, aborted when that session is lost or the manager stops: nothing started
   * for it (the election, a takeover waiting for the store) may go on and fence the successor.
   */
  private term: AbortController | undefined;
  /** The active parts being brought from suspended back to active, while that is under way. */
  private resuming: ActiveManager | undefined;
  private active: ActiveManager | undefined;
  /** The current session's way through the election to active (replaced on every rejoin). */
  private joining: Promise<void> | undefined;
  private address: { host: string; port: number } | undefined;

  constructor(private readonly options: ManagerOptions) {
    super();
    this.log = options.logger.child({ component: 'manager' });
    this.layout = new ZkLayout(options.zkRoot);
    const registry = createRegistry('manager');
    this.stateCell = new ProcessState({
      initial: 'connecting',
      lifecycle: MANAGER_LIFECYCLE,
      log: this.log,
      what: 'manager',
      registry,
      onChange: (s) => this.emit('state', s),
    });
    this.server = serverRpc(
      options,
      () => ({
        ok: this.state === 'active' || this.state === 'standby' || this.state === 'suspended',
        state: this.state,
      }),
      registry,
    );
    registerManagerMetrics(registry, {
      active: () => this.active,
      isActive: () => this.state === 'active',
      session: () => this.session,
      layout: this.layout,
      log: this.log,
      metricsCacheMs: options.metricsCacheMs ?? 5_000,
    });
    this.peers = new PeerClients({
      secret: options.secret,
      timeoutMs: options.rpcTimeoutMs,
      logger: options.logger,
    });
    registerManagerApi(
      this.server,
      () => this.parts(),
      () => this.status(),
      pickupMetric(registry, async () => {
        const { map } = await readQueueMap(this.session!, this.layout);
        return new Map([...map].map(([name, id]) => [id, name]));
      }),
    );
    registerHistoryApi(this.server, () => this.parts());
    registerUserCompactionApi(this.server, () => ({
      ...this.parts(),
      session: this.session!,
      layout: this.layout,
      log: this.log,
    }));
    registerTabletAdminApi(this.server, () => ({ ...this.parts(), peers: this.peers, log: this.log }));
    const adminParts = () => ({
      ...this.parts(),
      session: this.session!,
      layout: this.layout,
      peers: this.peers,
      log: this.log,
      objects: this.options.objectStore,
      gcGraceMs: this.options.gcGraceMs,
      // A leftover waits for the next sweep: at most a sweep interval and a cycle past its grace.
      gcSweepSlackMs: (this.options.gcSweepIntervalMs ?? 0) + this.options.gcIntervalMs,
    });
    registerAdminApi(this.server, adminParts);
    registerUserCompactionRequests(this.server, adminParts);
    registerSummariesApi(this.server, adminParts);
    registerIteratorApi(this.server, adminParts);
  }

  get state(): ManagerState | 'stopping' | 'stopped' {
    return this.stateCell.value;
  }

  /** Where this manager serves (after {@link start} began listening). */
  get url(): string {
    if (!this.address) throw new ExcError('INTERNAL', 'manager is not listening');
    return `http://${this.address.host}:${this.address.port}`;
  }

  /**
   * Listens and joins ZooKeeper; resolves once this manager stands in the election (it becomes active in
   * the background when it wins). Rejects when ZooKeeper cannot be reached at all.
   */
  async start(): Promise<void> {
    const bound = await listen(this.server, this.options);
    this.address = advertisedAddress(this.options, bound);
    this.log.info({ url: this.url }, 'manager listening');
    await this.join(await this.openSession());
  }

  /**
   * A new session with the instance's layout in place; closed again when the layout cannot be made (its
   * connection dropped under the first calls, say), so that a caller can simply try again.
   */
  private async openSession(): Promise<ZkSession> {
    const session = await connectZk(this.options);
    try {
      await ensureLayout(session, this.layout);
      return session;
    } catch (err) {
      await session.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Adopts `session`: standby at once, then the election and the takeover in the background. A session
   * lost on the way ends the attempt (expire() has started the next one).
   */
  private async join(session: ZkSession): Promise<void> {
    this.session = session;
    const term = (this.term = new AbortController());
    let disconnections = 0;
    session.on('lost', (reason) => this.expire(session, `zookeeper session lost (${reason})`));
    session.on('suspended', () => {
      disconnections++;
      if (this.state === 'active') this.stateCell.set('suspended', 'zookeeper connection lost');
    });
    session.on('reconnected', () => {
      if (session === this.session && this.state === 'suspended' && this.active)
        this.resume(session, this.active);
    });
    if (!this.stateCell.set('standby', 'joined the election')) return;
    this.joining = (async () => {
      await becomeManager(
        session,
        this.layout,
        { host: this.address!.host, port: this.address!.port, pid: process.pid, since: Date.now() },
        this.log,
        term.signal,
      );
      const seen = disconnections;
      const active = await activate({
        ...this.options, // the store, the collector's and the assignment's settings
        gcSweepIntervalMs: this.options.gcSweepIntervalMs ?? 0,
        session,
        layout: this.layout,
        peers: this.peers,
        log: this.log,
        signal: term.signal,
        sessionsKnown: () => this.state === 'active',
        checkQueues: (names) => checkQueuesExist(session, this.layout, names),
        onFenced: (err) => this.expire(session, `fenced by a newer manager: ${err.message}`),
      });
      // Disconnected now or meanwhile: the live tablet servers may have missed watch events (resume()).
      const current = session.state === 'connected' && disconnections === seen;
      if (
        session !== this.session ||
        term.signal.aborted ||
        !this.stateCell.set(current ? 'active' : 'suspended', 'won the election and took the store over')
      ) {
        // Superseded while taking over: give the store and the manager node back.
        await active.stop();
        if (session !== this.session) await session.close();
        return;
      }
      this.active = active;
      this.log.info({ epoch: active.epoch, url: this.url }, 'manager active');
      if (!current) this.resume(session, active);
    })().catch((err: unknown) => {
      if (this.stateCell.ending || session !== this.session) return;
      // Not a lost session (that has its own path): the takeover itself failed. Start over.
      this.expire(session, `could not become active: ${describeError(err)}`);
    });
  }

  /**
   * The session is gone, or this manager was fenced: stop writing at once, then join the election again
   * with a new session, for as long as it takes.
   */
  private expire(session: ZkSession, cause: string): void {
    if (session !== this.session || !this.stateCell.set('expired', cause)) return;
    this.term?.abort(new ExcError('ZK_SESSION_LOST', cause));
    // The old session is done with: whatever else still reports about it (the election waiting on it, a
    // takeover under way) is ignored from here on, so only one rejoin ever runs.
    this.session = undefined;
    const active = this.active;
    this.active = undefined; // from here on every request is answered NOT_MANAGER
    this.log.warn({ cause, wasActive: active !== undefined }, 'manager stops serving');
    void (async () => {
      await active?.stop();
      await session.close().catch(() => undefined);
      if (!this.stateCell.set('rejoining', 'opening a new session')) return;
      // Every failure before the new session is adopted is tried again with a fresh session — a connection
      // lost under the first calls included — for as long as it takes: giving up here would leave the
      // manager out of the election for good (found by the chaos soak).
      const next = await retry(() => this.openSession(), {
        attempts: Infinity,
        baseMs: 200,
        maxMs: 5_000,
        signal: this.abort.signal,
        retryOn: () => !this.stateCell.ending,
        onRetry: (err, attempt) =>
          this.log.warn({ err: describeError(err), attempt }, 'could not rejoin yet; retrying'),
      });
      if (this.stateCell.ending) return void (await next.close());
      await this.join(next);
    })().catch((err: unknown) => {
      if (!this.stateCell.ending) this.log.error({ err: describeError(err) }, 'rejoining failed');
    });
  }

  /**
   * Suspended → active once connected and the live tablet servers are read again: until the watch events
   * missed meanwhile arrive, a tablet server whose session ended in the gap would look live to the commits.
   */
  private resume(session: ZkSession, active: ActiveManager): void {
    if (this.resuming === active) return;
    this.resuming = active;
    const still = (): boolean =>
      session === this.session && this.active === active && this.state === 'suspended';
    active.live
      .readWhenConnected(still, this.abort.signal)
      .then((read) => {
        if (read && still())
          this.stateCell.set('active', 'zookeeper connection back, tablet servers read again');
      })
      .catch(() => undefined) // the session lost or the manager stopping: those have their own paths
      .finally(() => {
        if (this.resuming === active) this.resuming = undefined;
      });
  }

  /** The active manager's parts; NOT_MANAGER while not active (suspended still serves). */
  private parts(): ActiveParts {
    if ((this.state !== 'active' && this.state !== 'suspended') || !this.active) {
      throw new ExcError('NOT_MANAGER', `this manager is ${this.state}, not active`);
    }
    return this.active;
  }

  private status(): Record<string, unknown> {
    return {
      state: this.state,
      epoch: this.active?.epoch ?? null,
      url: this.address ? this.url : null,
      session: this.session?.sessionId ?? null,
      tservers: this.active ? Object.fromEntries(this.active.live.all) : {},
      commits: this.active?.commits.stats ?? null,
      assignment: this.active?.assigner.stats ?? null,
      gc: this.active?.gc?.stats ?? null,
      work: this.active ? { ...this.active.work.stats, waiting: this.active.work.waiting() } : null,
    };
  }

  /** Clean shutdown; safe to call twice. */
  close(): Promise<void> {
    return this.stateCell.stopOnce(async () => {
      this.abort.abort(new ExcError('SHUTTING_DOWN', 'manager is stopping'));
      this.term?.abort(new ExcError('SHUTTING_DOWN', 'manager is stopping'));
      const active = this.active;
      this.active = undefined;
      const steps: ShutdownStep[] = [
        // First: a manager that stops must not delete one more object; the collector's cycle is aborted.
        ['active parts', () => active?.stop()],
        ['http server', () => this.server.close(500)],
        ['election', () => this.joining?.catch(() => undefined)],
        ['zookeeper session', () => this.session?.close()],
      ];
      await runShutdownSteps(this.log, steps);
    });
  }
}
