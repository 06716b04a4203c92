/**
 * The tablet server process: hosts the tablets the manager assigns to it; serves ingest and scan; selects
 * compactions and runs the reservation protocol with compactors.
 *
 * Its life, in one place ({@link TSERVER_LIFECYCLE}):
 *
 *   connecting → serving ⇄ suspended          (a disconnection within the session timeout changes nothing:
 *                  │            │               tablets stay hosted, no reservation is cancelled; only reads
 *                  ▼            ▼               are refused while suspended, another server may be serving)
 *               expired → rejoining → serving  (a new session, a new node, a fresh server for the manager)
 *   any → stopping → stopped
 *
 * Its ephemeral node /excompact/tservers/<host:port> is created once it listens; its session id is the
 * fencing token written into `loc` of its tablets. When the session expires (or the manager fences a
 * mutation because the session is no longer the live one), everything built on it — the generation — is
 * dropped at once: its tablets are no longer served, and every mutation they could still send names the
 * dead session and is refused. Then the server opens a new session and registers again, at the same
 * address, as a fresh server the manager can assign tablets to. The process never exits for that.
 */
import { EventEmitter } from 'node:events';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps, type ShutdownStep } from '../lifecycle.js';
import { SECONDS_BUCKETS, counterOf, createRegistry, gaugeOf, zkSessionGauge } from '../metrics.js';
import { Histogram } from 'prom-client';
import { advertisedAddress } from '../net.js';
import {
  connectZk,
  listen,
  ProcessState,
  serverRpc,
  type Lifecycle,
  type ServerOptions,
} from '../process.js';
import type { RpcServer } from '../rpc/server.js';
import { retry, sleep, withTimeout } from '../retry.js';
import type { ObjectStore } from '../storage/index.js';
import { ZkLayout, ensureLayout, isZkCode, type ZkSession } from '../zk/index.js';
import { registerTserverApi } from './api.js';
import { DEFAULT_CHECKPOINT_PERSIST_BYTES, DEFAULT_CHECKPOINT_PERSIST_MS } from './reservations.js';
import type { UnfinishedFence } from './compactor-links.js';
import { Generation } from './generation.js';

export type TserverState = 'connecting' | 'serving' | 'suspended' | 'expired' | 'rejoining';

export const TSERVER_LIFECYCLE: Lifecycle<TserverState> = {
  connecting: ['serving'],
  serving: ['suspended', 'expired'],
  suspended: ['serving', 'expired'],
  expired: ['rejoining'],
  rejoining: ['serving', 'expired'],
};

export interface TserverOptions extends ServerOptions {
  store: ObjectStore;
  /** Cancel a reservation whose compactor reports no progress for this long (0: never). */
  stallTimeoutMs: number;
  /** Fence a compactor whose link closed while it held reservations, after this long (0: never). */
  compactorLinkGraceMs?: number;
  /** How often watched compactors are re-checked (the backstop for lost watches). */
  compactorSweepMs?: number;
  /** Record a compaction's checkpoint at most every this many bytes of output or ms (default 64 MB, 30 s). */
  checkpointBytes?: number;
  checkpointMs?: number;
  /** On close, wait up to this long for the manager to move the tablets elsewhere (default 0: do not). */
  tserverHandoverMs?: number;
  /** The collector's grace period (EXC_GC_GRACE_MS; default 10 minutes): bulk imports stay within it. */
  gcGraceMs?: number;
}

interface Events {
  state: [TserverState | 'stopping' | 'stopped'];
}

export class TabletServer extends EventEmitter<Events> {
  private readonly log: Logger;
  private readonly stateCell: ProcessState<TserverState>;
  private readonly server: RpcServer;
  private readonly layout: ZkLayout;
  private session: ZkSession | undefined;
  private generation: Generation | undefined;
  private rejoining: Promise<void> | undefined;
  /** Fences the session before left unfinished, until a new generation takes them over. */
  private unfinishedFences: UnfinishedFence[] = [];
  private readonly stopSignal = new AbortController();
  private address: { host: string; port: number } | undefined;
  private readonly registry = createRegistry('tserver');
  private readonly reclaim: Histogram;

  constructor(private readonly options: TserverOptions) {
    super();
    this.log = options.logger.child({ component: 'tserver' });
    this.stateCell = new ProcessState({
      initial: 'connecting',
      lifecycle: TSERVER_LIFECYCLE,
      log: this.log,
      what: 'tablet server',
      registry: this.registry,
      onChange: (s) => this.emit('state', s),
    });
    this.layout = new ZkLayout(options.zkRoot);
    this.server = serverRpc(
      options,
      () => ({ ok: this.state === 'serving', state: this.state }),
      this.registry,
    );
    const r = this.registry;
    const g = (): Generation | undefined => this.generation;
    counterOf(
      r,
      'excompact_tserver_reservations_total',
      'Reservation events: reserved, committed, cancelled, rejectedCommits, noWork',
      () => {
        const s = g()?.reservations.stats;
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
      () => g()?.data.stats.ingestedEntries,
    );
    counterOf(r, 'excompact_tserver_scans_total', 'Scans served', () => g()?.data.stats.scans);
    counterOf(r, 'excompact_tserver_splits_total', 'Tablets split here', () => g()?.splits.stats.splits);
    counterOf(r, 'excompact_tserver_merges_total', 'Tablet merges made here', () => g()?.merges.stats.merges);
    counterOf(
      r,
      'excompact_tserver_held_compactions_total',
      "Holds on a sibling's compaction settled: installed (its output put in place here) or released",
      () => {
        const s = g()?.holds.stats;
        return s && { installed: s.installed, released: s.released };
      },
    );
    counterOf(
      r,
      'excompact_tserver_fenced_compactors_total',
      'Compactors fenced because their link closed',
      () => g()?.links.fenced,
    );
    zkSessionGauge(r, () => this.session);
    this.reclaim = new Histogram({
      name: 'excompact_reclaim_seconds',
      help: "Time from a compactor's death (its link closing, else its node going) to its reservation cancelled here and its work back in the queue",
      buckets: SECONDS_BUCKETS,
      registers: [r],
    });
    gaugeOf(r, 'excompact_tserver_tablets', 'Tablets hosted', () => g()?.hosting.count ?? 0);
    gaugeOf(r, 'excompact_tserver_running_compactions', 'Reservations on hosted tablets', () =>
      g()
        ?.hosting.all()
        .reduce((n, t) => n + t.meta.reservations.size, 0),
    );
    registerTserverApi(this.server, {
      current: () => {
        const current = this.generation;
        if (!current) {
          throw new ExcError(
            'UNAVAILABLE',
            `tablet server ${this.address ? this.name : ''} is ${this.state}; try again`,
          );
        }
        return current;
      },
      compactorsRoot: this.layout.compactors,
      status: () => this.status(),
    });
  }

  get state(): TserverState | 'stopping' | 'stopped' {
    return this.stateCell.value;
  }

  /** `host:port`, the server's name in ZooKeeper and in `loc`. */
  get name(): string {
    if (!this.address) throw new ExcError('INTERNAL', 'tablet server is not listening');
    return `${this.address.host}:${this.address.port}`;
  }

  async start(): Promise<void> {
    const bound = await listen(this.server, this.options);
    this.address = advertisedAddress(this.options, bound);
    await this.join();
    this.stateCell.set('serving', 'registered');
    this.log.info({ name: this.name, session: this.session!.sessionId }, 'tablet server ready');
  }

  /** A new session, a new generation on it, and the server's node. */
  private async join(): Promise<void> {
    const session = await connectZk(this.options);
    try {
      if (this.stateCell.ending) throw new ExcError('SHUTTING_DOWN', 'tablet server is stopping');
      await ensureLayout(session, this.layout);
      const generation = await Generation.start({
        session,
        name: this.name,
        layout: this.layout,
        store: this.options.store,
        secret: this.options.secret,
        logger: this.options.logger,
        log: this.log,
        rpcTimeoutMs: this.options.rpcTimeoutMs,
        managerFailoverMs: this.options.managerFailoverMs,
        rpcMaxBodyBytes: this.options.rpcMaxBodyBytes,
        stallTimeoutMs: this.options.stallTimeoutMs,
        compactorLinkGraceMs: this.options.compactorLinkGraceMs ?? 200,
        compactorSweepMs: this.options.compactorSweepMs,
        checkpointPersist: {
          persistBytes: this.options.checkpointBytes ?? DEFAULT_CHECKPOINT_PERSIST_BYTES,
          persistMs: this.options.checkpointMs ?? DEFAULT_CHECKPOINT_PERSIST_MS,
        },
        onReclaimed: (seconds) => this.reclaim.observe(seconds),
        onFenced: (err) => this.expire(session, `the manager fenced a mutation: ${err.message}`),
        unfinishedFences: this.unfinishedFences,
        gcGraceMs: this.options.gcGraceMs,
      });
      try {
        await this.register(session);
      } catch (err) {
        await generation.end('registration failed');
        throw err;
      }
      this.session = session;
      this.generation = generation;
      this.unfinishedFences = [];
      session.on('suspended', () => {
        if (this.state === 'serving') this.stateCell.set('suspended', 'zookeeper connection lost');
      });
      session.on('reconnected', () => {
        if (this.state === 'suspended') this.stateCell.set('serving', 'zookeeper connection back');
      });
      session.on('lost', (reason) => this.expire(session, `zookeeper session lost (${reason})`));
    } catch (err) {
      await session.close();
      throw err;
    }
  }

  /**
   * The session is gone (or the manager no longer takes it): stop serving everything built on it at once,
   * then join again with a new session, for as long as it takes.
   */
  private expire(session: ZkSession, cause: string): void {
    if (session !== this.session || !this.stateCell.set('expired', cause)) return;
    // Whatever else still reports about the old session (a fenced mutation, its loss) is ignored from here
    // on, so only one rejoin ever runs.
    this.session = undefined;
    const generation = this.generation;
    this.generation = undefined;
    this.log.warn(
      { cause, tablets: generation?.hosting.count ?? 0 },
      'tablet server fenced: dropping its tablets',
    );
    this.rejoining = (async () => {
      await generation
        ?.end('the session that hosted it is gone')
        .catch((err: unknown) =>
          this.log.warn({ err: describeError(err) }, 'ending the old generation failed'),
        );
      this.unfinishedFences = generation?.unfinishedFences ?? [];
      if (this.unfinishedFences.length > 0) {
        this.log.info(
          { compactors: this.unfinishedFences.map((f) => f.compactor) },
          'fences left unfinished: the next session finishes them',
        );
      }
      await session.close().catch(() => undefined);
      if (!this.stateCell.set('rejoining', 'opening a new session')) return;
      await retry(() => this.join(), {
        attempts: Infinity,
        baseMs: 200,
        maxMs: 5_000,
        signal: this.stopSignal.signal,
        retryOn: () => !this.stateCell.ending,
        onRetry: (err, attempt) =>
          this.log.warn({ err: describeError(err), attempt }, 'could not rejoin yet; retrying'),
      });
      if (this.stateCell.set('serving', 'registered again with a new session'))
        this.log.info({ name: this.name, session: this.session!.sessionId }, 'tablet server ready');
    })().catch((err: unknown) => {
      if (!this.stateCell.ending) this.log.error({ err: describeError(err) }, 'rejoining failed');
    });
  }

  /** Creates the server's ephemeral node; waits out a node left by a previous session at the same address. */
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

  /** Asks the manager to move every tablet off this server, and waits for them to go (see `close`). */
  private async handOver(): Promise<void> {
    const g = this.generation;
    const session = this.session;
    const limit = this.options.tserverHandoverMs ?? 0;
    if (!g || !session || limit <= 0 || g.hosting.count === 0) return;
    const deadline = Date.now() + limit;
    const name = this.name;
    const ask = async (): Promise<boolean> => {
      const { tservers } = await g.meta.call<{ tservers: { server: string; draining: boolean }[] }>(
        'GET',
        '/v1/tservers',
        undefined,
        { idempotent: true },
      );
      // Nowhere to go: the tablets stay until this server's session ends.
      if (!tservers.some((t) => t.server !== name && !t.draining)) return false;
      await g.meta.call(
        'POST',
        `/v1/tservers/${encodeURIComponent(name)}/drain`,
        { session: session.sessionId, reason: 'stopping' },
        { idempotent: true },
      );
      return true;
    };
    const asked = await withTimeout(
      ask(),
      limit,
      () => new ExcError('TIMEOUT', 'the manager did not answer'),
    );
    if (!asked) return;
    const tablets = g.hosting.count;
    this.log.info({ tablets, waitMs: limit }, 'handing the tablets over before stopping');
    while (g.hosting.count > 0 && Date.now() < deadline) await sleep(100);
    this.log.info({ handedOver: tablets - g.hosting.count, left: g.hosting.count }, 'tablets handed over');
  }

  private status(): Record<string, unknown> {
    const g = this.generation;
    return {
      state: this.state,
      name: this.address ? this.name : null,
      session: this.session?.sessionId ?? null,
      tablets: g?.hosting.all().map((t) => ({
        tablet: t.row,
        files: t.meta.files.size,
        reservations: [...t.meta.reservations.keys()],
        queued: Object.fromEntries(t.meta.queued),
      })),
      reservations: g?.reservations.stats,
      data: g?.data.stats,
      splits: g?.splits.stats,
      merges: g?.merges.stats,
      holds: g?.holds.stats,
      watchedCompactors: g?.watch.watched.length ?? 0,
      fencedCompactors: g?.links.fenced ?? 0,
    };
  }

  /**
   * Clean shutdown; safe to call twice. The tablets are handed over first (while the server still serves
   * them: the manager moves them one by one, compactions running on them go on at their new hosts), for
   * up to `tserverHandoverMs` and only when another tablet server can take them. Closing the session then
   * removes our node, so the manager reassigns at once whatever is left.
   */
  close(): Promise<void> {
    return this.stateCell.stopOnce(async () => {
      await this.handOver().catch((err: unknown) =>
        this.log.warn({ err: describeError(err) }, 'handing the tablets over failed: stopping anyway'),
      );
      this.stopSignal.abort(new ExcError('SHUTTING_DOWN', 'tablet server is stopping'));
      const g = this.generation;
      const steps: ShutdownStep[] = [
        ['compactor links', () => g?.links.close()],
        ['http server', () => this.server.close(500)],
        ['generation', () => g?.end('stopping')],
        ['rejoin', () => this.rejoining?.catch(() => undefined)],
        ['zookeeper session', () => this.session?.close()],
        ['object store', () => this.options.store.close()],
      ];
      await runShutdownSteps(this.log, steps);
    });
  }
}
