/**
 * The manager process: owns the metadata store, assigns tablets, collects garbage, serves the admin API.
 *
 * States: starting → standby → active → stopping → stopped. A manager listens at once (answering
 * NOT_MANAGER while standby), then waits for the manager node in ZooKeeper; once it holds it, it opens the
 * store, takes it over (fencing any older holder by epoch) and becomes active.
 *
 * Losing the ZooKeeper session is fatal: another manager may already be active, so this one stops serving
 * at once and the process exits (an orchestrator restarts it as a standby).
 */
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps, type ShutdownStep } from '../lifecycle.js';
import { MetaStore } from '../meta/store.js';
import { WorkerWriter } from '../meta/writer.js';
import { counterOf, createRegistry, gaugeOf } from '../metrics.js';
import { advertisedHost } from '../net.js';
import { readQueueMap } from '../queue/registry.js';
import { PeerClients } from '../rpc/peers.js';
import { connectZk, ProcessState, serverRpc, type ServerOptions } from '../process.js';
import type { RpcServer } from '../rpc/server.js';
import { ZkLayout, ensureLayout, type ZkSession } from '../zk/index.js';
import { registerAdminApi } from './admin-api.js';
import { registerManagerApi, type ActiveParts } from './api.js';
import { Assigner } from './assignment.js';
import { CommitQueue } from './commit-queue.js';
import { becomeManager } from './election.js';
import { GarbageCollector, type GcObjectStore } from './gc.js';
import { LiveTservers } from './live-tservers.js';
import { Tables } from './tables.js';
import { WorkFinder } from './work-finder.js';

export type ManagerState = 'starting' | 'standby' | 'active' | 'stopping' | 'stopped';

export interface ManagerOptions extends ServerOptions {
  /** Directory of the metadata store (metadata.sqlite). */
  dataDir: string;
  /** For garbage collection; without it files are never deleted. */
  objectStore?: GcObjectStore;
  gcGraceMs: number;
  gcIntervalMs: number;
  /** Keep compaction outcome rows (`~done:`) this long. */
  outcomeRetentionMs: number;
  assignIntervalMs?: number;
}

interface Events {
  state: [ManagerState];
  /** The manager stopped serving because it can no longer be sure it is the active one. */
  fatal: [reason: string];
}

export class Manager extends EventEmitter<Events> {
  private readonly log: Logger;
  private readonly stateCell: ProcessState<ManagerState>;
  private readonly server: RpcServer;
  private readonly layout: ZkLayout;
  private readonly peers: PeerClients;
  private readonly abort = new AbortController();
  private session: ZkSession | undefined;
  private active: (ActiveParts & { assigner: Assigner; writer: WorkerWriter }) | undefined;
  private address: { host: string; port: number } | undefined;

  constructor(private readonly options: ManagerOptions) {
    super();
    this.log = options.logger.child({ component: 'manager' });
    this.stateCell = new ProcessState<ManagerState>('starting', this.log, 'manager', (s) =>
      this.emit('state', s),
    );
    this.layout = new ZkLayout(options.zkRoot);
    const registry = createRegistry('manager');
    this.server = serverRpc(
      options,
      () => ({ ok: this.state === 'active' || this.state === 'standby', state: this.state }),
      registry,
    );
    counterOf(
      registry,
      'excompact_manager_commit_batches_total',
      'Group commits of the metadata store',
      () => this.active?.commits.stats.batches,
    );
    counterOf(
      registry,
      'excompact_manager_mutations_total',
      'Conditional mutations applied or rejected',
      () => this.active?.commits.stats.mutations,
    );
    counterOf(
      registry,
      'excompact_manager_gc_deleted_files_total',
      'Files deleted by the garbage collector',
      () => this.active?.gc?.stats.deleted,
    );
    gaugeOf(
      registry,
      'excompact_manager_live_tservers',
      'Live tablet servers',
      () => this.active?.live.all.size,
    );
    gaugeOf(
      registry,
      'excompact_manager_waiting_compactors',
      'Compactors waiting for work, by queue id',
      () => this.active?.work.waiting(),
      'queue',
    );
    gaugeOf(registry, 'excompact_manager_active', '1 when this manager is the active one', () =>
      this.state === 'active' ? 1 : 0,
    );
    this.peers = new PeerClients({
      secret: options.secret,
      timeoutMs: options.rpcTimeoutMs,
      logger: options.logger,
    });
    registerManagerApi(
      this.server,
      () => this.parts(),
      () => this.status(),
    );
    registerAdminApi(this.server, () => ({
      ...this.parts(),
      session: this.session!,
      layout: this.layout,
      peers: this.peers,
      log: this.log,
      objects: this.options.objectStore,
      gcGraceMs: this.options.gcGraceMs,
    }));
  }

  get state(): ManagerState {
    return this.stateCell.value;
  }

  /** Where this manager serves (after {@link start} began listening). */
  get url(): string {
    if (!this.address) throw new ExcError('INTERNAL', 'manager is not listening');
    return `http://${this.address.host}:${this.address.port}`;
  }

  /** Listens, joins ZooKeeper, and resolves once this manager is active (or rejects). */
  async start(): Promise<void> {
    const bound = await this.server.listen(this.options.bindHost, this.options.port);
    this.address = { host: advertisedHost(this.options, bound.host), port: bound.port };
    this.log.info({ url: this.url }, 'manager listening');

    const session = await connectZk(this.options);
    this.session = session;
    session.on('lost', (reason) => this.fail(`zookeeper session lost (${reason})`));
    await ensureLayout(session, this.layout);

    this.stateCell.set('standby');
    await becomeManager(
      session,
      this.layout,
      { host: this.address.host, port: this.address.port, pid: process.pid, since: Date.now() },
      this.log,
      this.abort.signal,
    );
    await this.activate(session);
  }

  private async activate(session: ZkSession): Promise<void> {
    // Reads on this thread; writes (one fsync per batch) on the writer thread, which also takes the store
    // over, fencing any older manager.
    const path = join(this.options.dataDir, 'metadata.sqlite');
    const writer = new WorkerWriter(path);
    let store: MetaStore | undefined;
    let live: LiveTservers | undefined;
    // Until `this.active` is set, close() finds nothing of this to stop: a close (or a failure) while
    // this waits must be noticed here, and what was built so far closed here.
    const stopIfEnding = (): void => {
      if (this.stateCell.ending) throw new ExcError('SHUTTING_DOWN', 'manager stopped while activating');
    };
    let epoch: number;
    try {
      epoch = await writer.takeOver({
        signal: this.abort.signal,
        onLocked: (err) =>
          this.log.warn(
            { err: err.message },
            'waiting for the metadata store (another process holds its lock)',
          ),
      });
      stopIfEnding();
      store = new MetaStore({ path });
      live = new LiveTservers(session, this.layout, this.log);
      await live.start();
      stopIfEnding();
    } catch (err) {
      await runShutdownSteps(this.log, [
        ['tablet server watch', () => live?.stop()],
        ['metadata store', () => store?.close()],
        ['metadata writer', () => writer.close()],
      ]);
      throw err;
    }
    this.serve({ writer, epoch, store, live });
  }

  /** Assembles the active manager's parts around the store it took over, and starts serving. */
  private serve({
    writer,
    epoch,
    store,
    live,
  }: {
    writer: WorkerWriter;
    epoch: number;
    store: MetaStore;
    live: LiveTservers;
  }): void {
    const commits = new CommitQueue(
      writer,
      (fence) => live.isLive(fence.server, fence.session),
      this.log,
      (err) => this.fail(err.message),
    );
    const tables = new Tables(store, commits, (names) => this.checkQueues(names), this.log);
    const assigner = new Assigner(
      store,
      commits,
      live,
      (tableId) => tables.getById(tableId)?.state === 'online',
      this.peers,
      this.log,
      { intervalMs: this.options.assignIntervalMs },
    );
    const gc = this.options.objectStore
      ? new GarbageCollector(
          store,
          commits,
          this.options.objectStore,
          {
            graceMs: this.options.gcGraceMs,
            intervalMs: this.options.gcIntervalMs,
            outcomeRetentionMs: this.options.outcomeRetentionMs,
            epoch,
          },
          this.log,
          (err) => this.fail(err.message),
        )
      : undefined;
    const unload = async (server: string, tablet: string): Promise<void> => {
      await this.peers
        .get(server)
        .post('/v1/tablets/unload', { tablet }, { idempotent: true, attempts: 2, timeoutMs: 5_000 });
    };
    const notifyTservers = (what: { tableId?: string; tablet?: string }): void => {
      for (const server of live.all.keys()) {
        this.peers
          .get(server)
          .post('/v1/tablets/refresh', what, { idempotent: true, attempts: 2, timeoutMs: 5_000 })
          .catch((err: unknown) =>
            this.log.debug({ server, err: describeError(err) }, 'refresh request failed'),
          );
      }
    };
    this.active = {
      store,
      commits,
      tables,
      live,
      gc,
      epoch,
      unload,
      kickAssignment: () => void assigner.kick(),
      notifyTservers,
      work: new WorkFinder(store, commits),
      assigner,
      writer,
    };
    this.stateCell.set('active');
    this.log.info({ epoch, url: this.url }, 'manager active');
    assigner.start();
    gc?.start();
    tables
      .resumeDeletes(unload)
      .catch((err: unknown) => this.log.warn({ err: describeError(err) }, 'resuming deletions failed'));
  }

  private parts(): ActiveParts {
    if (this.state !== 'active' || !this.active) {
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

  private async checkQueues(names: string[]): Promise<void> {
    if (names.length === 0 || !this.session) return;
    const { map } = await readQueueMap(this.session, this.layout);
    const missing = names.filter((n) => !map[n]);
    if (missing.length > 0) {
      throw new ExcError(
        'UNKNOWN_QUEUE',
        `no queue named ${missing.map((n) => JSON.stringify(n)).join(', ')}`,
        {
          details: { queue: missing },
        },
      );
    }
  }

  /** Stops serving at once: this manager can no longer be sure it is the active one. */
  private fail(reason: string): void {
    if (this.stateCell.ending) return;
    this.log.fatal({ reason }, 'manager stops serving');
    this.emit('fatal', reason);
    void this.close();
  }

  /** Clean shutdown; safe to call twice. */
  close(): Promise<void> {
    return this.stateCell.stopOnce(async () => {
      this.abort.abort(new ExcError('SHUTTING_DOWN', 'manager is stopping'));
      const active = this.active;
      this.active = undefined;
      const steps: ShutdownStep[] = [
        // First: a manager that stops because it was fenced must not delete one more object, and the
        // collector's cycle is aborted, not waited for.
        ['garbage collector', () => active?.gc?.stop()],
        ['http server', () => this.server.close(500)],
        ['assignment', () => active?.assigner.stop()],
        ['tablet server watch', () => active?.live.stop()],
        ['metadata store', () => active?.store.close()],
        ['metadata writer', () => active?.writer.close()],
        ['zookeeper session', () => this.session?.close()],
      ];
      await runShutdownSteps(this.log, steps);
    });
  }
}
