/**
 * The reservation protocol on the tablet server: the I/O around the rules of rules.ts. For each request,
 * in the tablet's mutex: read the tablet back if its copy is stale, ask the rules what to do, apply the
 * change through hosting (which adds the `loc` fence and the new queue entries), and keep the compactor
 * watch, the progress clocks, the counters and the log in step.
 *
 * - reserve: the compactor's node must exist, checked and watched before anything is recorded, so a
 *   compactor that dies from then on is seen; a compactor can reserve only for its own queue.
 * - commit: the output must exist with the size the compactor reports, and the compactor's node must be
 *   alive, checked last (a zombie, paused past its session and resumed, has lost it and can never commit;
 *   its reservation is cancelled instead).
 * - cancel: by the compactor holding it (a failure, a release) or for it (its node is gone, it stalled,
 *   an admin, its queue deleted, its tablet merged, its table offline): cancellations.ts.
 *
 * When the metadata store does not confirm a change (OUTCOME_UNKNOWN), hosting has read the tablet back,
 * and the rules decide from what the store holds whether it happened.
 */
import { ExcError, describeError } from '../errors.js';
import { ulid } from '../ids.js';
import { newFileName } from '../meta/paths.js';
import type { HexRange } from '../meta/rows.js';
import { rowsOf } from '../meta/tablet.js';
import type { CommitRequest, ReserveRequest, ReservedJob } from '../queue/protocol.js';
import type { ZkLayout } from '../zk/index.js';
import type { ReservationRef } from './compactor-watch.js';
import type { HostedTablet, ProgressFigures } from './hosted-tablet.js';
import { Cancellations, type CancellationsDeps } from './cancellations.js';
import { commitHappened, decideCommit, isAbandoned, ownedReservation, type CancelReason } from './rules.js';
import { decideReserve, reserveHappened, reservedJob, type ReserveContext } from './reserve-rules.js';
import { ProgressReports } from './progress-reports.js';
import type { CheckpointPersist, ReportedCheckpoint } from './resume-rules.js';

export type { CancelReason } from './rules.js';

export interface ReservationsDeps extends CancellationsDeps {
  layout: ZkLayout;
  /** Queue name → id (undefined for a queue that does not exist). */
  queueIdOf: (name: string) => string | undefined;
  /** Whether the output object exists with this size (commit checks what it installs). */
  outputSize: (name: string) => Promise<number | null>;
  /**
   * Rows (hex) that split these inputs into `parts` shares of about equal bytes (storage/split-rows.ts);
   * without it, no job is split.
   */
  splitRows?: (inputs: readonly string[], parts: number, rows: HexRange) => Promise<string[]>;
  /** Persist progress at most this often per reservation (default 5 s). */
  progressPersistMs?: number;
  /** Cancel a reservation with no progress for this long (0 disables). */
  stallTimeoutMs?: number;
  /** Record checkpoints at most this often (default 64 MB or 30 s). */
  checkpointPersist?: CheckpointPersist;
  /** Told each reservation recorded, by its compactor (its link may have closed meanwhile). */
  onReserved?: (compactor: string) => void;
}

/** A checkpoint is recorded about every 64 MB of output or 30 s, whichever comes first. */
export const DEFAULT_CHECKPOINT_PERSIST_BYTES = 64 * 1024 * 1024;
export const DEFAULT_CHECKPOINT_PERSIST_MS = 30_000;

const isUnknown = (err: unknown): boolean => err instanceof ExcError && err.code === 'OUTCOME_UNKNOWN';

export class Reservations {
  readonly reports: ProgressReports;
  /** Counters for /status and metrics. */
  readonly stats = {
    reserved: 0,
    committed: 0,
    cancelled: 0,
    rejectedCommits: 0,
    noWork: 0,
    /** Commits per queue id. */
    committedByQueue: Object.create(null) as Record<string, number>,
  };

  private readonly cancellations: Cancellations;

  constructor(private readonly deps: ReservationsDeps) {
    this.cancellations = new Cancellations(deps, this.stats);
    this.reports = new ProgressReports({
      hosting: deps.hosting,
      log: deps.log,
      ...(deps.progressPersistMs === undefined ? {} : { progressPersistMs: deps.progressPersistMs }),
      checkpointPersist: deps.checkpointPersist ?? {
        persistBytes: DEFAULT_CHECKPOINT_PERSIST_BYTES,
        persistMs: DEFAULT_CHECKPOINT_PERSIST_MS,
      },
      cancelStalled: (tablet, ecid, error) => this.cancel(tablet, ecid, 'stalled', { error }),
    });
  }

  start(): void {
    this.reports.startStallDetector(this.deps.stallTimeoutMs ?? 0);
  }

  stop(): void {
    this.reports.stop();
  }

  async reserve(req: ReserveRequest): Promise<ReservedJob | null> {
    const { hosting, watch, configs } = this.deps;
    if (!req.compactor.startsWith(`${this.deps.layout.queueNode(req.queueId)}/`)) {
      throw new ExcError(
        'BAD_REQUEST',
        `compactor ${req.compactor} is not a compactor of queue ${req.queueId}`,
      );
    }
    const tablet = await hosting.get(req.tablet);
    // Checked (and watched) before anything is recorded: a compactor that dies from here on is seen.
    if (!watch.knownAlive(req.compactor) && !(await watch.checkAndWatch(req.compactor))) {
      throw new ExcError('COMPACTOR_GONE', `compactor ${req.compactor} has no live node`, {
        details: { compactor: req.compactor },
      });
    }
    return tablet.mutex.run(async () => {
      if (tablet.stale) await hosting.resync(tablet);
      // About to merge: its running compactions end, no new one starts (a kept job to resume neither).
      if (tablet.closing) {
        this.stats.noWork++;
        return null;
      }
      const settings = await configs.get(tablet.meta.tableId);
      const ctx: ReserveContext = {
        jobs: await hosting.planFor(tablet),
        config: settings.config,
        queueIdOf: this.deps.queueIdOf,
        ecid: ulid(),
        output: newFileName(tablet.meta.tableId, 'compaction'),
        now: Date.now(),
        mayDropDeletes: tablet.mayDropDeletes(),
      };
      let decision = decideReserve(tablet.meta, req, ctx);
      if (decision.kind === 'split') {
        // A large job: the rows to split it at come from its inputs' indexes, read now (in the mutex, so
        // the job is still the one planned). Unreadable or unsplittable inputs run as one job.
        const { job, parts } = decision;
        const choose = this.deps.splitRows ?? (() => Promise.resolve([]));
        const bounds = await choose(job.files, parts, rowsOf(tablet.meta)).catch((err: unknown) => {
          this.deps.log.warn(
            { tablet: tablet.row, err: describeError(err) },
            'could not choose where to split a job: it runs whole',
          );
          return [];
        });
        decision = decideReserve(tablet.meta, req, { ...ctx, splitBounds: { files: job.files, bounds } });
        if (decision.kind === 'split') throw new ExcError('INTERNAL', 'a job split twice');
      }
      if (decision.kind === 'repeat') return reservedJob(tablet.meta, decision.ecid, decision.reservation);
      if (decision.kind === 'no-work') {
        // Nothing for this queue (any more): the change removes the stale queue entry.
        await hosting.change(tablet, { replan: true });
        this.stats.noWork++;
        return null;
      }
      const { ecid, reservation, job } = decision;
      let applied: boolean;
      try {
        applied = await hosting.change(tablet, { ...decision.change, replan: true });
      } catch (err) {
        if (isUnknown(err) && !tablet.stale && reserveHappened(tablet.meta, ecid)) applied = true;
        else throw err;
      }
      if (!applied)
        throw new ExcError('CONFLICT', `tablet ${tablet.row} changed during the reservation; try again`);
      watch.add(req.compactor, { tablet: tablet.row, ecid });
      this.deps.onReserved?.(req.compactor);
      tablet.startProgressClock(ecid);
      this.stats.reserved++;
      // At info, like the commit and the cancel: a reservation's whole life can be followed by its ecid.
      this.deps.log.info(
        {
          tablet: tablet.row,
          ecid,
          compactor: req.compactor,
          files: job.files.length,
          kind: job.kind,
          ...(reservation.split
            ? {
                split: reservation.split.id,
                subJob: `${reservation.split.index + 1}/${reservation.split.of}`,
              }
            : {}),
          ...(decision.resumedFrom
            ? { resumedFrom: decision.resumedFrom, checkpointBytes: reservation.checkpoint?.bytes }
            : {}),
        },
        'reserved',
      );
      return reservedJob(tablet.meta, ecid, reservation);
    });
  }

  async commit(req: CommitRequest): Promise<void> {
    const tablet = await this.deps.hosting.get(req.tablet);
    try {
      await tablet.mutex.run(() => this.commitLocked(tablet, req));
    } catch (err) {
      if (err instanceof ExcError && err.code === 'RESERVATION_GONE') this.stats.rejectedCommits++;
      throw err;
    }
  }

  private async commitLocked(tablet: HostedTablet, req: CommitRequest): Promise<void> {
    const { hosting, watch } = this.deps;
    if (tablet.stale) await hosting.resync(tablet);
    const r = ownedReservation(tablet.meta, req.ecid, req.compactor);
    if (req.output) {
      const size = await this.deps.outputSize(r.output);
      if (size !== req.output.size) {
        throw new ExcError(
          'BAD_REQUEST',
          `output ${r.output} is ${size === null ? 'missing' : `${size} bytes`}, not ${req.output.size}`,
        );
      }
    }
    await this.refuseDeadCompactor(tablet, r.compactor, req);
    let applied = false;
    // Twice at most: a user job's commit is conditional on its requests, which the manager may have
    // cancelled without this server hearing yet; then they are read again and the commit decided anew.
    for (let round = 0; round < 2 && !applied; round++) {
      if (round > 0) {
        if (r.kind !== 'user') break;
        await hosting.rereadRequests(tablet);
        if (tablet.state !== 'hosted' || !tablet.meta.reservations.has(req.ecid)) break;
        await this.refuseDeadCompactor(tablet, r.compactor, req); // after that round trip, again
      }
      // A user job whose requests were all cancelled commits nothing (its filter must never be applied,
      // in whole or, for a split, in part): it is cancelled here, before the refresh would.
      if (isAbandoned(tablet.meta, req.ecid)) {
        await this.cancellations.cancelLocked(tablet, req.ecid, 'admin');
        throw new ExcError(
          'RESERVATION_GONE',
          `the user compactions of reservation ${req.ecid} were cancelled; reservation cancelled`,
          { details: { ecid: req.ecid, tablet: req.tablet } },
        );
      }
      const change = decideCommit(tablet.meta, r, req, { now: Date.now(), server: tablet.me.server });
      try {
        applied = await hosting.change(tablet, { ...change, replan: true });
      } catch (err) {
        if (isUnknown(err) && !tablet.stale && commitHappened(tablet.meta, r, req.ecid, req.output))
          applied = true;
        else throw err;
      }
    }
    if (!applied) {
      throw new ExcError(
        'RESERVATION_GONE',
        `reservation ${req.ecid} of ${req.tablet} changed; commit rejected`,
      );
    }
    watch.remove(r.compactor, req.ecid);
    tablet.forgetProgress(req.ecid);
    this.deps.onEnded?.(req.ecid);
    this.stats.committed++;
    this.stats.committedByQueue[r.queueId] = (this.stats.committedByQueue[r.queueId] ?? 0) + 1;
    this.deps.log.info(
      { tablet: tablet.row, ecid: req.ecid, inputs: r.inputs.length, empty: !req.output },
      'committed',
    );
  }

  /**
   * Cancels the reservation, RESERVATION_GONE, unless its compactor's node is alive. Called last, right
   * before committing, after any round trip. The watch on the node answers without one when it can vouch
   * for it (see CompactorWatch.knownAlive).
   */
  private async refuseDeadCompactor(
    tablet: HostedTablet,
    compactor: string,
    req: CommitRequest,
  ): Promise<void> {
    const { watch } = this.deps;
    if (watch.knownAlive(compactor) || (await watch.checkAndWatch(compactor))) return;
    await this.cancellations.cancelLocked(tablet, req.ecid, 'compactor-gone');
    throw new ExcError(
      'RESERVATION_GONE',
      `compactor ${compactor} has no live node; reservation ${req.ecid} cancelled`,
      {
        details: { ecid: req.ecid, tablet: req.tablet },
      },
    );
  }

  /** Cancels a reservation (if it still exists): cancellations.ts. */
  cancel(
    tabletRow: string,
    ecid: string,
    reason: CancelReason,
    options: { error?: string; compactor?: string } = {},
  ): Promise<boolean> {
    return this.cancellations.cancel(tabletRow, ecid, reason, options);
  }

  /** A compactor's node disappeared: cancel all its reservations here (cancellations.ts). */
  onCompactorGone(refs: ReservationRef[], since?: number): void {
    this.cancellations.onCompactorGone(refs, since);
  }

  /** A progress report (and the checkpoint it may carry): progress-reports.ts. */
  progress(
    tabletRow: string,
    ecid: string,
    compactor: string,
    progress: ProgressFigures,
    checkpoint?: ReportedCheckpoint,
  ): Promise<void> {
    return this.reports.report(tabletRow, ecid, compactor, progress, checkpoint);
  }
}
