/**
 * Everything a tablet server builds on one ZooKeeper session: its fencing token (the session id in `loc`),
 * the tablets it hosts under it, the compactor watch, the reservations, the data path, the reconciler and
 * the compactor links. When the session expires the whole generation is dropped at once — nothing done
 * under the old session can succeed any more (every mutation names it) — and the tablet server builds a
 * new one on a new session (tserver.ts).
 */
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { MetaClient } from '../meta/client.js';
import { toRowRange } from '../meta/rows.js';
import type { Location } from '../meta/tablet.js';
import { QueueResolver } from '../queue/resolver.js';
import { PeerClients } from '../rpc/peers.js';
import { abandonedUserJobs } from '../queue/selection.js';
import { splitRows, type ObjectStore } from '../storage/index.js';
import type { ZkLayout, ZkSession } from '../zk/index.js';
import { CompactorLinks, type UnfinishedFence } from './compactor-links.js';
import { CompactorProbe } from './compactor-probe.js';
import { CompactorWatch } from './compactor-watch.js';
import { BulkImports } from './bulk-import.js';
import { DataPath } from './data.js';
import { Hosting } from './hosting.js';
import { Reconciler } from './reconciler.js';
import { HoldResolver } from './hold-resolver.js';
import { Reservations } from './reservations.js';
import { TabletMerges } from './tablet-merges.js';
import { TabletSplits } from './tablet-splits.js';
import type { CheckpointPersist } from './resume-rules.js';
import { TableOffline } from './table-offline.js';
import { TableConfigs } from './table-configs.js';

export interface GenerationContext {
  session: ZkSession;
  /** `host:port`: the server's name in ZooKeeper and in `loc`. */
  name: string;
  layout: ZkLayout;
  store: ObjectStore;
  secret: string;
  logger: Logger;
  log: Logger;
  rpcTimeoutMs: number;
  managerFailoverMs?: number;
  /** The largest RPC body the manager takes (EXC_RPC_MAX_BODY_BYTES): grouped mutations stay under it. */
  rpcMaxBodyBytes?: number;
  stallTimeoutMs: number;
  compactorLinkGraceMs: number;
  compactorSweepMs?: number;
  /** How often compactors holding reservations here without a link are asked for (compactor-probe.ts). */
  compactorProbeMs?: number;
  checkpointPersist: CheckpointPersist;
  /** Told how long after a compactor died each of its reservations here was cancelled. */
  onReclaimed?: (seconds: number) => void;
  /** The manager refused a mutation because this session is not the server's live one. */
  onFenced: (err: ExcError) => void;
  /** Fences of compactors the server's session before left unfinished: this one finishes them. */
  unfinishedFences?: readonly UnfinishedFence[];
  /** The collector's grace period (EXC_GC_GRACE_MS): an import's file must be referenced well within it. */
  gcGraceMs?: number;
}

/** Every half second: a crashed compactor's work is back about this long after this server took it over. */
const PROBE_EVERY_MS = 500;
const PROBE_TIMEOUT_MS = 1_000;

export class Generation {
  readonly me: Location;
  readonly meta: MetaClient;
  readonly queues: QueueResolver;
  readonly configs: TableConfigs;
  readonly watch: CompactorWatch;
  readonly hosting: Hosting;
  readonly reservations: Reservations;
  readonly data: DataPath;
  readonly imports: BulkImports;
  readonly reconciler: Reconciler;
  readonly splits: TabletSplits;
  readonly merges: TabletMerges;
  readonly holds: HoldResolver;
  readonly links: CompactorLinks;
  readonly probe: CompactorProbe;
  readonly offline: TableOffline;
  private ended = false;
  /** The fences left unfinished when the generation ended, for the next one (set by `end`). */
  unfinishedFences: UnfinishedFence[] = [];

  private constructor(readonly ctx: GenerationContext) {
    const { session, layout, log } = ctx;
    this.me = { server: ctx.name, session: session.sessionId };
    this.meta = new MetaClient({
      session,
      layout,
      secret: ctx.secret,
      logger: ctx.logger,
      timeoutMs: ctx.rpcTimeoutMs,
      failoverMs: ctx.managerFailoverMs,
      maxBodyBytes: ctx.rpcMaxBodyBytes,
    });
    this.queues = new QueueResolver(session, layout, log);
    this.configs = new TableConfigs(this.meta);
    this.watch = new CompactorWatch(
      session,
      // Its death: when its link here closed (a crash closes it at once), else when its node went.
      (compactor, refs) =>
        this.reservations.onCompactorGone(
          refs,
          this.links.linkClosedAt(compactor) ?? this.watch.diedAt(compactor),
        ),
      log,
    );
    this.hosting = new Hosting({
      me: this.me,
      meta: this.meta,
      queues: this.queues,
      configs: this.configs,
      watch: this.watch,
      log,
      onFenced: ctx.onFenced,
      // A user job whose requests were all cancelled (the manager deleted them) stops here; holds whose
      // reservation ended while no one hosted the tablet are settled.
      onRefreshed: (t) => {
        this.offline.cancelCutOff(t);
        for (const ecid of abandonedUserJobs(t.meta))
          void this.reservations.cancel(t.row, ecid, 'admin').catch(() => undefined);
        if (t.meta.holds.size > 0) void this.holds.resolve(t, [...t.meta.holds.keys()]);
      },
      // A tablet whose data passed its table's split threshold splits (soon, outside the change).
      onChanged: (t) => this.splits.maybeSplit(t),
    });
    this.splits = new TabletSplits({
      hosting: this.hosting,
      configs: this.configs,
      store: ctx.store,
      me: this.me,
      log,
    });
    this.holds = new HoldResolver(this.hosting, this.meta, log);
    this.reservations = new Reservations({
      hosting: this.hosting,
      watch: this.watch,
      configs: this.configs,
      layout,
      queueIdOf: (name) => this.queues.byQueueName(name)?.id,
      queueExists: async (queueId) => (await session.exists(layout.queueNode(queueId))) !== null,
      queueCompactors: async (queueId) => (await session.children(layout.queueNode(queueId))).length,
      outputSize: async (name) => (await ctx.store.stat(name))?.size ?? null,
      splitRows: (inputs, parts, rows) => splitRows(ctx.store, inputs, parts, undefined, toRowRange(rows)),
      log,
      stallTimeoutMs: ctx.stallTimeoutMs,
      checkpointPersist: ctx.checkpointPersist,
      // A compactor that died while its reservation was being made: its link closed holding nothing.
      onReserved: (compactor) => this.links.reserved(compactor),
      onEnded: (ecid) => this.holds.ended(ecid),
      ...(ctx.onReclaimed ? { onReclaimed: ctx.onReclaimed } : {}),
    });
    this.offline = new TableOffline(this.hosting, this.reservations, this.configs);
    this.merges = new TabletMerges({
      hosting: this.hosting,
      reservations: this.reservations,
      store: ctx.store,
      log,
    });
    // Reads are refused while the session is in doubt: another server may already host these tablets.
    this.data = new DataPath(this.hosting, ctx.store, this.configs, () => {
      if (this.ended || session.state !== 'connected') {
        throw new ExcError(
          'UNAVAILABLE',
          `tablet server ${ctx.name} is not connected to ZooKeeper; try again`,
        );
      }
    });
    this.imports = new BulkImports(this.hosting, ctx.store, (ctx.gcGraceMs ?? 600_000) / 2);
    let cursor: { feed: string; seq: number } | undefined;
    this.reconciler = new Reconciler(this.hosting, this.watch, log, {
      everyMs: ctx.compactorSweepMs,
      eachRound: () => this.holds.sweep(),
      changes: async () => {
        const answer = await this.meta.changes(cursor, ctx.name);
        cursor = { feed: answer.feed, seq: answer.seq };
        return answer;
      },
    });
    this.links = new CompactorLinks({
      holds: (compactor) => this.watch.holds(compactor),
      deleteNode: (compactor) => session.delete(compactor),
      graceMs: ctx.compactorLinkGraceMs,
      log,
    });
    // One attempt, and soon given up: an answer that does not come proves nothing (compactor-probe.ts).
    const compactors = new PeerClients({ secret: ctx.secret, timeoutMs: PROBE_TIMEOUT_MS, attempts: 1 });
    this.probe = new CompactorProbe({
      unlinked: () => this.links.unlinked(this.watch.watched),
      addressOf: (compactor) => this.watch.addressOf(compactor),
      ask: (status) => compactors.get(status).get('/status'),
      // An answer that comes after the generation ended is not this server's to act on any more.
      fence: (compactor, why) => {
        if (!this.ended) this.links.fence(compactor, why);
      },
      everyMs: ctx.compactorProbeMs ?? PROBE_EVERY_MS,
      log,
    });
  }

  /** Builds a generation on `session` and starts its background work. */
  static async start(ctx: GenerationContext): Promise<Generation> {
    const g = new Generation(ctx);
    await g.queues.start();
    const { hosting, reservations } = g;
    // A new queue: tablets routing to it can queue their work there now.
    g.queues.onAdded(() => {
      for (const t of hosting.all()) void hosting.replan(t).catch(() => undefined);
    });
    // A deleted queue: its reservations are cancelled and the tablets requeue elsewhere.
    g.queues.onRemoved((removed) => {
      const ids = new Set(removed.map((q) => q.id));
      for (const t of hosting.all()) {
        for (const [ecid, r] of t.meta.reservations) {
          if (ids.has(r.queueId))
            void reservations.cancel(t.row, ecid, 'queue-deleted').catch(() => undefined);
        }
        void hosting.replan(t).catch(() => undefined);
      }
    });
    g.watch.start();
    reservations.start();
    g.reconciler.start();
    g.probe.start();
    g.links.takeOver(ctx.unfinishedFences ?? []);
    return g;
  }

  /** Re-reads a table's settings and refreshes its hosted tablets (the manager asks, after a change). */
  async refreshTable(tableId: string): Promise<void> {
    await this.configs.reload(tableId).catch(() => undefined);
    for (const t of this.hosting.all()) if (t.meta.tableId === tableId) await this.hosting.refresh(t.row);
  }

  /**
   * Ends the generation: it hosts nothing from now on (its tablets are dropped at once; their next host
   * loads them from the store), and its background work stops. Safe to call twice.
   */
  async end(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.unfinishedFences = this.links.unfinished();
    this.links.close();
    this.probe.stop();
    this.hosting.dropAll(reason);
    this.reservations.stop();
    this.watch.stop();
    this.reconciler.stop(); // not waiting for a round in progress: see Reconciler.stop
    await this.queues.stop();
  }
}
