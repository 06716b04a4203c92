/**
 * The tablet server process: hosts the tablets the manager assigns to it; serves ingest and scan; selects
 * compactions and runs the reservation protocol with compactors.
 *
 * States: starting → serving → stopping → stopped. Its ephemeral node /excompact/tservers/<host:port> is
 * created only once it listens; its session id is the fencing token written into `loc` of its tablets.
 * Losing that session is fatal: the server stops serving at once (its mutations would be rejected anyway,
 * since they name the session) and the process exits so it can be restarted with a new one.
 */
import { EventEmitter } from 'node:events';
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps, type ShutdownStep } from '../lifecycle.js';
import { MetaClient } from '../meta/client.js';
import type { Location } from '../meta/tablet.js';
import { counterOf, createRegistry, gaugeOf } from '../metrics.js';
import { advertisedHost } from '../net.js';
import { QueueResolver } from '../queue/resolver.js';
import { connectZk, ProcessState, serverRpc, type ServerOptions } from '../process.js';
import type { RpcServer } from '../rpc/server.js';
import { sleep } from '../retry.js';
import type { ObjectStore } from '../storage/index.js';
import { ZkLayout, ensureLayout, isZkCode, type ZkSession } from '../zk/index.js';
import { registerTserverApi } from './api.js';
import { CompactorLinks } from './compactor-links.js';
import { CompactorWatch } from './compactor-watch.js';
import { DataPath } from './data.js';
import { Hosting } from './hosting.js';
import { Reconciler } from './reconciler.js';
import { Reservations } from './reservations.js';
import { TableConfigs } from './table-configs.js';

export type TserverState = 'starting' | 'serving' | 'stopping' | 'stopped';

export interface TserverOptions extends ServerOptions {
  store: ObjectStore;
  /** Cancel a reservation whose compactor reports no progress for this long (0: never). */
  stallTimeoutMs: number;
  /** Fence a compactor whose link closed while it held reservations, after this long (0: never). */
  compactorLinkGraceMs?: number;
  /** How often watched compactors are re-checked (the backstop for lost watches). */
  compactorSweepMs?: number;
}

interface Events {
  state: [TserverState];
  fatal: [reason: string];
}

export class TabletServer extends EventEmitter<Events> {
  private readonly log: Logger;
  private readonly stateCell: ProcessState<TserverState>;
  private readonly server: RpcServer;
  private readonly layout: ZkLayout;
  private session: ZkSession | undefined;
  private parts:
    | {
        hosting: Hosting;
        reservations: Reservations;
        watch: CompactorWatch;
        links: CompactorLinks;
        queues: QueueResolver;
        data: DataPath;
        me: Location;
        reconciler: Reconciler;
      }
    | undefined;
  private address: { host: string; port: number } | undefined;
  private readonly registry = createRegistry('tserver');

  constructor(private readonly options: TserverOptions) {
    super();
    this.log = options.logger.child({ component: 'tserver' });
    this.stateCell = new ProcessState<TserverState>('starting', this.log, 'tablet server', (s) =>
      this.emit('state', s),
    );
    this.layout = new ZkLayout(options.zkRoot);
    this.server = serverRpc(
      options,
      () => ({ ok: this.state === 'serving', state: this.state }),
      this.registry,
    );
    const r = this.registry;
    counterOf(
      r,
      'excompact_tserver_reservations_total',
      'Reservation events: reserved, committed, cancelled, rejectedCommits, noWork',
      () => {
        const s = this.parts?.reservations.stats;
        return (
          s && {
            reserved: s.reserved,
            committed: s.committed,
            cancelled: s.cancelled,
            rejectedCommits: s.rejectedCommits,
            noWork: s.noWork,
          }
        );
      },
    );
    counterOf(
      r,
      'excompact_tserver_ingested_entries_total',
      'Entries ingested',
      () => this.parts?.data.stats.ingestedEntries,
    );
    counterOf(r, 'excompact_tserver_scans_total', 'Scans served', () => this.parts?.data.stats.scans);
    gaugeOf(r, 'excompact_tserver_tablets', 'Tablets hosted', () => this.parts?.hosting.count);
    gaugeOf(r, 'excompact_tserver_running_compactions', 'Reservations on hosted tablets', () =>
      this.parts?.hosting.all().reduce((n, t) => n + t.meta.reservations.size, 0),
    );
  }

  get state(): TserverState {
    return this.stateCell.value;
  }

  /** `host:port`, the server's name in ZooKeeper and in `loc`. */
  get name(): string {
    if (!this.address) throw new ExcError('INTERNAL', 'tablet server is not listening');
    return `${this.address.host}:${this.address.port}`;
  }

  async start(): Promise<void> {
    const bound = await this.server.listen(this.options.bindHost, this.options.port);
    this.address = { host: advertisedHost(this.options, bound.host), port: bound.port };

    const session = await connectZk(this.options);
    this.session = session;
    session.on('lost', (reason) => this.fail(`zookeeper session lost (${reason})`));
    await ensureLayout(session, this.layout);

    const me: Location = { server: this.name, session: session.sessionId };
    const meta = new MetaClient({
      session,
      layout: this.layout,
      secret: this.options.secret,
      logger: this.options.logger,
      timeoutMs: this.options.rpcTimeoutMs,
      failoverMs: this.options.managerFailoverMs,
    });
    const queues = new QueueResolver(session, this.layout, this.log);
    await queues.start();
    const configs = new TableConfigs(meta);
    // The watch calls into the reservations, created just below (the closure runs later).
    const watch = new CompactorWatch(
      session,
      (_compactor, refs) => reservations.onCompactorGone(refs),
      this.log,
    );
    const hosting = new Hosting({
      me,
      meta,
      queues,
      configs,
      watch,
      log: this.log,
      onFenced: (err) => this.fail(err.message),
    });
    const reservations = new Reservations({
      hosting,
      watch,
      configs,
      layout: this.layout,
      queueIdOf: (name) => queues.byQueueName(name)?.id,
      queueExists: async (queueId) => (await session.exists(this.layout.queueNode(queueId))) !== null,
      outputSize: async (name) => (await this.options.store.stat(name))?.size ?? null,
      log: this.log,
      stallTimeoutMs: this.options.stallTimeoutMs,
    });
    const data = new DataPath(hosting, this.options.store, configs, () => {
      if (session.state !== 'connected') {
        throw new ExcError(
          'UNAVAILABLE',
          `tablet server ${this.name} is not connected to ZooKeeper; try again`,
        );
      }
    });
    const reconciler = new Reconciler(hosting, watch, this.log, { everyMs: this.options.compactorSweepMs });
    const links = new CompactorLinks({
      holds: (compactor) => watch.holds(compactor),
      deleteNode: (compactor) => session.delete(compactor),
      graceMs: this.options.compactorLinkGraceMs ?? 200,
      log: this.log,
    });
    this.parts = { hosting, reservations, watch, links, queues, data, me, reconciler };
    const refreshTable = async (tableId: string): Promise<void> => {
      await configs.reload(tableId).catch(() => undefined);
      for (const t of hosting.all()) if (t.meta.tableId === tableId) await hosting.refresh(t.row);
    };
    registerTserverApi(this.server, {
      hosting,
      links,
      compactorsRoot: this.layout.compactors,
      reservations,
      data,
      session: () => session.sessionId,
      status: () => this.status(),
      refreshTable,
    });
    // A new queue: tablets routing to it can queue their work there now.
    queues.onAdded(() => {
      for (const t of hosting.all()) void hosting.replan(t).catch(() => undefined);
    });
    // A deleted queue: its reservations are cancelled and the tablets requeue elsewhere.
    queues.onRemoved((removed) => {
      const ids = new Set(removed.map((q) => q.id));
      for (const t of hosting.all()) {
        for (const [ecid, r] of t.meta.reservations) {
          if (ids.has(r.queueId))
            void reservations.cancel(t.row, ecid, 'queue-deleted').catch(() => undefined);
        }
        void hosting.replan(t).catch(() => undefined);
      }
    });
    watch.start();
    reservations.start();
    reconciler.start();

    await this.register(session);
    this.stateCell.set('serving');
    this.log.info({ name: this.name, session: session.sessionId }, 'tablet server ready');
  }

  /** Creates the server's ephemeral node; waits out a node left by a previous process at the same address. */
  private async register(session: ZkSession): Promise<void> {
    const path = this.layout.tserverNode(this.name);
    const data = JSON.stringify({
      host: this.address!.host,
      port: this.address!.port,
      pid: process.pid,
      since: Date.now(),
    });
    const deadline = Date.now() + 2 * session.sessionTimeoutMs + 5_000;
    for (;;) {
      try {
        await session.create(path, data, 'ephemeral');
        return;
      } catch (err) {
        if (!isZkCode(err, 'ZK_NODE_EXISTS')) throw err;
        const stat = await session.exists(path);
        if (stat?.ephemeralOwner === session.sessionId) return;
        if (Date.now() > deadline) {
          throw new ExcError('CONFLICT', `another tablet server is registered as ${this.name} (${path})`);
        }
        await sleep(200);
      }
    }
  }

  private status(): Record<string, unknown> {
    const p = this.parts;
    return {
      state: this.state,
      name: this.address ? this.name : null,
      session: this.session?.sessionId ?? null,
      tablets: p?.hosting.all().map((t) => ({
        tablet: t.row,
        files: t.meta.files.size,
        reservations: [...t.meta.reservations.keys()],
        queued: Object.fromEntries(t.meta.queued),
      })),
      reservations: p?.reservations.stats,
      data: p?.data.stats,
      watchedCompactors: p?.watch.watched.length ?? 0,
    };
  }

  private fail(reason: string): void {
    if (this.stateCell.ending) return;
    this.log.fatal({ reason }, 'tablet server stops serving');
    this.emit('fatal', reason);
    void this.close();
  }

  /** Clean shutdown; safe to call twice. Closing the session removes our node, so the manager reassigns at once. */
  close(): Promise<void> {
    return this.stateCell.stopOnce(async () => {
      const p = this.parts;
      const steps: ShutdownStep[] = [
        ['compactor links', () => p?.links.close()],
        ['http server', () => this.server.close(500)],
        ['reconciler', () => p?.reconciler.stop()],
        ['reservations', () => p?.reservations.stop()],
        ['compactor watch', () => p?.watch.stop()],
        ['queues', () => p?.queues.stop()],
        ['zookeeper session', () => this.session?.close()],
        ['object store', () => this.options.store.close()],
      ];
      await runShutdownSteps(this.log, steps);
    });
  }
}
