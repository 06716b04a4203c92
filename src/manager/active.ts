/**
 * What a manager runs while it is the active one: the metadata store it took over (fencing any older
 * holder by epoch), group commit, the tables, assignment, garbage collection, the work finder and the
 * finishing of queue deletions cut short — all
 * built on the ZooKeeper session that won the election, and all stopped together when that session is
 * lost or the manager stops (manager.ts).
 */
import { join } from 'node:path';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps } from '../lifecycle.js';
import type { MetaBackend } from '../meta/backend.js';
import { PostgresBackend } from '../meta/postgres.js';
import { SqliteBackend } from '../meta/sqlite-backend.js';
import { BackendWriter, WorkerWriter, type BatchWriter } from '../meta/writer.js';
import { OrphanQueueSweeper } from '../queue/orphans.js';
import type { PeerClients } from '../rpc/peers.js';
import type { ZkLayout, ZkSession } from '../zk/index.js';
import type { ActiveParts } from './api.js';
import { Assigner } from './assignment.js';
import { AutoMerger, type MergeParts } from './merges.js';
import { ChangeFeed } from './change-feed.js';
import { CommitQueue } from './commit-queue.js';
import { GarbageCollector, type GcObjectStore } from './gc.js';
import { LiveTservers } from './live-tservers.js';
import { FollowedIndex, checkEvery } from './followed-index.js';
import { ActivityTable } from './tablet-activity.js';
import { OutcomeCounts } from './outcome-counts.js';
import { Tables } from './tables.js';
import { WorkFinder } from './work-finder.js';

export interface ActiveContext {
  session: ZkSession;
  layout: ZkLayout;
  dataDir: string;
  /** `postgres://…`: the metadata store on PostgreSQL; undefined: SQLite under `dataDir`. */
  metaUrl?: string;
  objectStore?: GcObjectStore;
  gcGraceMs: number;
  gcIntervalMs: number;
  gcSweepIntervalMs: number;
  outcomeRetentionMs: number;
  outcomeMaxRows?: number;
  assignIntervalMs?: number;
  mergeWaitMs?: number;
  balanceMoves?: number;
  peers: PeerClients;
  log: Logger;
  /** The election term: aborted when the session that won is lost or the manager stops (manager.ts). */
  signal: AbortSignal;
  /** Whether tablet servers' sessions can be checked now (false while disconnected from ZooKeeper). */
  sessionsKnown: () => boolean;
  /** Fails when a table routes to a queue that does not exist. */
  checkQueues: (names: string[]) => Promise<void>;
  /** A write was refused because a newer manager took the store over. */
  onFenced: (err: ExcError) => void;
}

export type ActiveManager = ActiveParts & {
  assigner: Assigner;
  writer: BatchWriter;
  /** How many compactions ended, and how, from the durable rows (exported as metrics). */
  outcomes: OutcomeCounts;
  /** Stops everything at once; the garbage collector first (a fenced manager must delete nothing more). */
  stop(): Promise<void>;
};

/** Takes the store over and starts serving as the active manager. */
export async function activate(ctx: ActiveContext): Promise<ActiveManager> {
  const { log } = ctx;
  // SQLite: reads on this thread; writes (one fsync per batch) on the writer thread, which also takes
  // the store over, fencing any older manager. PostgreSQL: one backend for both, the database serializing
  // the writers.
  let writer: BatchWriter | undefined;
  let store: MetaBackend | undefined;
  let live: LiveTservers | undefined;
  let epoch: number;
  try {
    if (ctx.metaUrl) {
      store = await PostgresBackend.open({ url: ctx.metaUrl });
      writer = new BackendWriter(store);
    } else {
      writer = new WorkerWriter(join(ctx.dataDir, 'metadata.sqlite'));
    }
    epoch = await writer.takeOver({
      signal: ctx.signal,
      onLocked: (err) =>
        log.warn(
          { code: err.code, err: err.message },
          'waiting for the metadata store (another process holds its lock)',
        ),
    });
    ctx.signal.throwIfAborted();
    // It may have waited long for the store: go on only while the session that won the election (its
    // term not over, checked just above) still holds the manager node.
    const holder = await ctx.session.exists(ctx.layout.manager);
    if (holder?.ephemeralOwner !== ctx.session.sessionId) {
      throw new ExcError(
        'NOT_MANAGER',
        'took the store over, but this session no longer holds the manager node',
        {
          details: { session: ctx.session.sessionId, holder: holder?.ephemeralOwner ?? null },
        },
      );
    }
    store ??= SqliteBackend.open({ path: join(ctx.dataDir, 'metadata.sqlite') });
    log.info({ store: store.describe, epoch }, 'metadata store taken over');
    live = new LiveTservers(ctx.session, ctx.layout, log);
    await live.start();
    ctx.signal.throwIfAborted();
  } catch (err) {
    await runShutdownSteps(log, [
      ['tablet server watch', () => live?.stop()],
      ['metadata store', () => store?.close()],
      ['metadata writer', () => writer?.close()],
    ]);
    throw err;
  }
  return serve(ctx, writer, epoch, store, live);
}

function serve(
  ctx: ActiveContext,
  writer: BatchWriter,
  epoch: number,
  store: MetaBackend,
  live: LiveTservers,
): ActiveManager {
  const { log, peers } = ctx;
  const commits = new CommitQueue(
    writer,
    (fence) => (ctx.sessionsKnown() ? live.isLive(fence.server, fence.session) : undefined),
    log,
    ctx.onFenced,
  );
  const feed = new ChangeFeed();
  commits.onApplied(({ changed }) => feed.record(changed));
  const activity = new FollowedIndex(store, commits, () => new ActivityTable(), { epoch });
  // Checked as often as the collector checks its index against the store (a full read of the tablets).
  const stopActivityChecks = checkEvery(
    activity,
    'activity index',
    Math.max(ctx.gcSweepIntervalMs, ctx.gcIntervalMs),
    log,
  );
  activity
    .current()
    .catch((err: unknown) => log.warn({ err: describeError(err) }, 'reading which tablets have work failed'));
  const tables = new Tables(store, commits, ctx.checkQueues, log);
  const outcomes = new OutcomeCounts(store, commits, ctx.outcomeRetentionMs);
  outcomes
    .start()
    .catch((err: unknown) => log.warn({ err: describeError(err) }, 'reading outcome counts failed'));
  const assigner = new Assigner(
    store,
    commits,
    live,
    async () => new Set((await tables.list()).filter((t) => t.state === 'online').map((t) => t.id)),
    peers,
    log,
    {
      intervalMs: ctx.assignIntervalMs,
      maxMoves: ctx.balanceMoves ?? 8,
      onPass: (tablets) => autoMerger.consider(tablets),
    },
  );
  const merging: MergeParts = { tables, peers, assigner, log, waitMs: ctx.mergeWaitMs ?? 30_000 };
  const autoMerger = new AutoMerger(merging);
  const gc = ctx.objectStore
    ? new GarbageCollector(
        store,
        commits,
        ctx.objectStore,
        {
          graceMs: ctx.gcGraceMs,
          intervalMs: ctx.gcIntervalMs,
          sweepIntervalMs: ctx.gcSweepIntervalMs,
          outcomeRetentionMs: ctx.outcomeRetentionMs,
          ...(ctx.outcomeMaxRows === undefined ? {} : { outcomeMaxRows: ctx.outcomeMaxRows }),
          foldOutcomes: (rows) => outcomes.foldMutation(rows),
          epoch,
        },
        log,
        ctx.onFenced,
      )
    : undefined;
  const unload = async (server: string, tablet: string): Promise<void> => {
    await peers
      .get(server)
      .post('/v1/tablets/unload', { tablet }, { idempotent: true, attempts: 2, timeoutMs: 5_000 });
  };
  const notifyTservers = (what: { tableId?: string; tablet?: string }): void => {
    for (const server of live.all.keys()) {
      peers
        .get(server)
        .post('/v1/tablets/refresh', what, { idempotent: true, attempts: 2, timeoutMs: 5_000 })
        .catch((err: unknown) => log.debug({ server, err: describeError(err) }, 'refresh request failed'));
    }
  };
  const queueDeletions = new OrphanQueueSweeper(ctx.session, ctx.layout, log);
  let stopping: Promise<void> | undefined;
  const active: ActiveManager = {
    store,
    commits,
    tables,
    live,
    gc,
    epoch,
    unload,
    kickAssignment: () => void assigner.kick(),
    notifyTservers,
    feed,
    activity,
    work: new WorkFinder(store, commits),
    merging,
    assigner,
    writer,
    outcomes,
    stop: () =>
      (stopping ??= runShutdownSteps(log, [
        ['garbage collector', () => gc?.stop()],
        ['outcome counts', () => outcomes.stop()],
        [
          'activity index',
          () => {
            stopActivityChecks();
            activity.stop();
          },
        ],
        ['assignment', () => assigner.stop()],
        ['automatic merges', () => autoMerger.stop()],
        ['queue deletions', () => queueDeletions.stop()],
        ['tablet server watch', () => live.stop()],
        ['metadata store', () => store.close()],
        ['metadata writer', () => writer.close()],
      ])),
  };
  assigner.start();
  gc?.start();
  queueDeletions.start();
  tables
    .resumeDeletes(unload)
    .catch((err: unknown) => log.warn({ err: describeError(err) }, 'resuming deletions failed'));
  tables
    .abandonCreations()
    .catch((err: unknown) => log.warn({ err: describeError(err) }, 'removing unfinished creations failed'));
  return active;
}

export function notActive(state: string): ExcError {
  return new ExcError('NOT_MANAGER', `this manager is ${state}, not active`);
}
