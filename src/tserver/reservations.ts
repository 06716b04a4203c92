/**
 * The reservation protocol on the tablet server side (DESIGN.md, "The life of a compaction", steps 3, 5, 6).
 *
 * - reserve: the compactor's node must exist (checked and watched in one call); the job is computed now
 *   from the tablet's current files (late binding); the reservation and the tablet's new queue entries are
 *   one conditional mutation. Concurrent reservations never share a file: the tablet's mutex serialises
 *   them and the planner never selects reserved files. A compactor names each attempt (`requestId`), so a
 *   reserve whose answer was lost can be repeated and gets the same reservation back.
 * - commit: one conditional mutation — the reservation still exists (as recorded), the inputs are still
 *   files of the tablet, `loc` is this server — replaces the inputs by the output, deletes the reservation
 *   and marks the inputs for deletion. A compactor whose node is gone cannot commit (zombie).
 * - cancel: one conditional mutation on the reservation removes it, marks its output for deletion and
 *   requeues. Commit and cancel are both conditional on the reservation, so exactly one of them wins.
 * - failures survive cancels: after `maxAttempts` failed attempts on the same inputs the job is parked.
 *
 * When the metadata store does not confirm a change (OUTCOME_UNKNOWN), the tablet has been read back, and
 * each operation decides from what the store holds whether it happened.
 */
import { ExcError, describeError } from '../errors.js';
import { ulid } from '../ids.js';
import type { Logger } from '../log.js';
import { delRow } from '../meta/keys.js';
import { notEnded, outcomeCell, type Outcome } from '../meta/outcomes.js';
import { newFileName } from '../meta/paths.js';
import {
  compactCol,
  ecompCol,
  failedCol,
  fileCol,
  isParked,
  progressCol,
  type Failure,
  type Progress,
  type Reservation,
} from '../meta/tablet.js';
import { tableConfigSchema } from '../meta/table-config.js';
import type { Condition } from '../meta/types.js';
import type { CommitRequest, ReserveRequest, ReservedJob } from '../queue/protocol.js';
import type { ZkLayout } from '../zk/index.js';
import type { CompactorWatch, ReservationRef } from './compactor-watch.js';
import { failureKey, type HostedTablet, type ProgressFigures } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import { iteratorSettings, type TableConfigs } from './table-configs.js';

/** Why a reservation ended without a commit. Only some count as failed attempts. */
export type CancelReason = 'compactor-gone' | 'failed' | 'stalled' | 'released' | 'admin' | 'queue-deleted';
const COUNTS_AS_FAILURE: ReadonlySet<CancelReason> = new Set(['compactor-gone', 'failed', 'stalled']);

export interface ReservationsDeps {
  hosting: Hosting;
  watch: CompactorWatch;
  configs: TableConfigs;
  layout: ZkLayout;
  /** Queue name → id (undefined for a queue that does not exist). */
  queueIdOf: (name: string) => string | undefined;
  /** Whether a queue's node still exists (a compactor that vanished with its queue did not fail). */
  queueExists: (queueId: string) => Promise<boolean>;
  /** Whether the output object exists with this size (commit checks what it installs). */
  outputSize: (name: string) => Promise<number | null>;
  log: Logger;
  /** Persist progress at most this often per reservation (default 5 s). */
  progressPersistMs?: number;
  /** Cancel a reservation with no progress for this long (0 disables). */
  stallTimeoutMs?: number;
}

/** Used when the table's settings cannot be read to decide whether a failed job is parked. */
const DEFAULT_MAX_ATTEMPTS = tableConfigSchema.parse({}).maxAttempts;

const isUnknown = (err: unknown): boolean => err instanceof ExcError && err.code === 'OUTCOME_UNKNOWN';

/**
 * The condition that a reservation still exists. Its column is written once, under a fresh ULID, and only
 * ever deleted, so being there means unchanged (comparing values would tie every stored reservation to
 * how today's schema re-serialises it).
 */
const reservationExists = (row: string, ecid: string): Condition => ({
  op: 'present',
  row,
  col: ecompCol(ecid),
});

/** The outcome row of a reservation of `tablet` that ends now. */
function ended(
  tablet: HostedTablet,
  r: Reservation,
  how: Pick<Outcome, 'outcome' | 'at'> & Partial<Pick<Outcome, 'reason' | 'error' | 'entries'>>,
): Outcome {
  return {
    ...how,
    tablet: tablet.row,
    queueId: r.queueId,
    compactor: r.compactor,
    kind: r.kind,
    inputs: r.inputs.length,
    reservedAt: r.reservedAt,
    server: tablet.me.server,
  };
}

export class Reservations {
  private stallTimer: NodeJS.Timeout | undefined;
  /** Counters for /status and metrics. */
  readonly stats = {
    reserved: 0,
    committed: 0,
    cancelled: 0,
    rejectedCommits: 0,
    noWork: 0,
    /** Commits per queue id. */
    committedByQueue: {} as Record<string, number>,
  };

  constructor(private readonly deps: ReservationsDeps) {}

  start(): void {
    const stall = this.deps.stallTimeoutMs ?? 0;
    if (stall > 0) {
      this.stallTimer = setInterval(
        () => void this.cancelStalled(stall),
        Math.max(250, Math.min(stall / 4, 5_000)),
      );
      this.stallTimer.unref();
    }
  }

  stop(): void {
    clearInterval(this.stallTimer);
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
      // A repeated request (its first answer was lost) gets the reservation it made.
      const earlier = this.byRequest(tablet, req);
      if (earlier) return earlier;

      const settings = await configs.get(tablet.meta.tableId);
      const jobs = await hosting.planFor(tablet);
      const job = jobs.find((j) => j.queue !== undefined && this.deps.queueIdOf(j.queue) === req.queueId);
      if (!job) {
        // Nothing for this queue (any more): the change removes the stale queue entry.
        await hosting.change(tablet, { replan: true });
        this.stats.noWork++;
        return null;
      }
      const ecid = ulid();
      const key = failureKey(job.files);
      const user = job.userCompactionId ? tablet.meta.userCompactions.get(job.userCompactionId) : undefined;
      const reservation: Reservation = {
        compactor: req.compactor,
        queueId: req.queueId,
        inputs: job.files,
        output: newFileName(tablet.meta.tableId, 'compaction'),
        kind: job.kind,
        attempt: tablet.meta.failures.get(key)?.attempts ?? 0,
        reservedAt: Date.now(),
        allFiles: job.allFiles,
        ...(job.userCompactionId ? { userCompactionId: job.userCompactionId } : {}),
        ...(req.requestId ? { requestId: req.requestId } : {}),
        settings: iteratorSettings(settings.config, user?.filters ?? [], job.allFiles),
      };
      let applied: boolean;
      try {
        applied = await hosting.change(tablet, {
          conditions: job.files.map((f) => ({ op: 'present' as const, row: tablet.row, col: fileCol(f) })),
          puts: [{ row: tablet.row, col: ecompCol(ecid), value: JSON.stringify(reservation) }],
          apply: (meta) => meta.reservations.set(ecid, reservation),
          replan: true,
        });
      } catch (err) {
        // Read back: if the reservation was made, it is now in the tablet (and watched).
        if (isUnknown(err) && !tablet.stale && tablet.meta.reservations.has(ecid)) applied = true;
        else throw err;
      }
      if (!applied)
        throw new ExcError('CONFLICT', `tablet ${tablet.row} changed during the reservation; try again`);
      watch.add(req.compactor, { tablet: tablet.row, ecid });
      tablet.startProgressClock(ecid);
      this.stats.reserved++;
      // At info, like the commit and the cancel: a reservation's whole life can be followed by its ecid.
      this.deps.log.info(
        { tablet: tablet.row, ecid, compactor: req.compactor, files: job.files.length, kind: job.kind },
        'reserved',
      );
      return this.describe(tablet, ecid, reservation);
    });
  }

  private byRequest(tablet: HostedTablet, req: ReserveRequest): ReservedJob | undefined {
    if (!req.requestId) return undefined;
    for (const [ecid, r] of tablet.meta.reservations) {
      if (r.requestId === req.requestId && r.compactor === req.compactor)
        return this.describe(tablet, ecid, r);
    }
    return undefined;
  }

  private describe(tablet: HostedTablet, ecid: string, r: Reservation): ReservedJob {
    return {
      ecid,
      tablet: tablet.row,
      tableId: tablet.meta.tableId,
      queueId: r.queueId,
      kind: r.kind,
      attempt: r.attempt,
      inputs: r.inputs.map((name) => ({ name, ...(tablet.meta.files.get(name) ?? { size: 0, entries: 0 }) })),
      output: r.output,
      settings: r.settings,
      keepDeletes: !r.allFiles,
    };
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
    const r = this.owned(tablet, req.ecid, req.compactor);
    if (req.output) {
      const size = await this.deps.outputSize(r.output);
      if (size !== req.output.size) {
        throw new ExcError(
          'BAD_REQUEST',
          `output ${r.output} is ${size === null ? 'missing' : `${size} bytes`}, not ${req.output.size}`,
        );
      }
    }
    // A zombie (paused past its session, then resumed) has lost its node: it can never commit. Checked
    // last, right before committing, after any round trip. The watch on its node answers without one
    // when it can vouch for it (see CompactorWatch.knownAlive).
    if (!watch.knownAlive(r.compactor) && !(await watch.checkAndWatch(r.compactor))) {
      await this.cancelLocked(tablet, req.ecid, 'compactor-gone');
      throw new ExcError(
        'RESERVATION_GONE',
        `compactor ${r.compactor} has no live node; reservation ${req.ecid} cancelled`,
        {
          details: { ecid: req.ecid, tablet: req.tablet },
        },
      );
    }
    const output = req.output;
    const now = String(Date.now());
    // Failure records about any of the inputs are moot once they are compacted away.
    const moot = [...tablet.meta.failures]
      .filter(([, f]) => f.inputs.some((i) => r.inputs.includes(i)))
      .map(([k]) => k);
    let applied: boolean;
    try {
      applied = await hosting.change(tablet, {
        conditions: [
          reservationExists(tablet.row, req.ecid),
          notEnded(req.ecid),
          ...r.inputs.map((f) => ({ op: 'present' as const, row: tablet.row, col: fileCol(f) })),
        ],
        deletes: [
          ...r.inputs.map((f) => ({ row: tablet.row, col: fileCol(f) })),
          { row: tablet.row, col: ecompCol(req.ecid) },
          { row: tablet.row, col: progressCol(req.ecid) },
          ...moot.map((k) => ({ row: tablet.row, col: failedCol(k) })),
          ...(r.userCompactionId ? [{ row: tablet.row, col: compactCol(r.userCompactionId) }] : []),
        ],
        puts: [
          ...(output ? [{ row: tablet.row, col: fileCol(r.output), value: JSON.stringify(output) }] : []),
          ...r.inputs.map((f) => ({ row: delRow(f), col: 'at', value: now })),
          outcomeCell(
            req.ecid,
            ended(tablet, r, { outcome: 'committed', entries: output?.entries ?? 0, at: Number(now) }),
          ),
        ],
        apply: (meta) => {
          for (const f of r.inputs) meta.files.delete(f);
          if (output) meta.files.set(r.output, output);
          meta.reservations.delete(req.ecid);
          meta.progress.delete(req.ecid);
          for (const k of moot) meta.failures.delete(k);
          if (r.userCompactionId) meta.userCompactions.delete(r.userCompactionId);
        },
        replan: true,
      });
    } catch (err) {
      if (!isUnknown(err) || tablet.stale) throw err;
      // Read back: the commit happened if the reservation is gone and its inputs replaced.
      const m = tablet.meta;
      const done =
        !m.reservations.has(req.ecid) &&
        r.inputs.every((f) => !m.files.has(f)) &&
        (!output || m.files.has(r.output));
      if (!done) throw err;
      applied = true;
    }
    if (!applied) {
      throw new ExcError(
        'RESERVATION_GONE',
        `reservation ${req.ecid} of ${req.tablet} changed; commit rejected`,
      );
    }
    watch.remove(r.compactor, req.ecid);
    tablet.forgetProgress(req.ecid);
    this.stats.committed++;
    this.stats.committedByQueue[r.queueId] = (this.stats.committedByQueue[r.queueId] ?? 0) + 1;
    this.deps.log.info(
      { tablet: tablet.row, ecid: req.ecid, inputs: r.inputs.length, empty: !output },
      'committed',
    );
  }

  /**
   * The reservation `ecid` of a tablet, which only the compactor holding it may commit, fail, release or
   * report on; RESERVATION_GONE when it does not exist (cancelled or committed) or is another's.
   */
  private owned(tablet: HostedTablet, ecid: string, compactor: string): Reservation {
    const r = tablet.meta.reservations.get(ecid);
    if (!r || r.compactor !== compactor) {
      throw new ExcError(
        'RESERVATION_GONE',
        `reservation ${ecid} of ${tablet.row} does not exist (cancelled or committed)`,
        {
          details: { ecid, tablet: tablet.row },
        },
      );
    }
    return r;
  }

  /**
   * Cancels a reservation (if it still exists). Resolves whether this call removed it. With `compactor`
   * (a compactor failing or releasing its job), only that compactor's reservation: RESERVATION_GONE if it
   * is not.
   */
  async cancel(
    tabletRow: string,
    ecid: string,
    reason: CancelReason,
    options: { error?: string; compactor?: string } = {},
  ): Promise<boolean> {
    const tablet = await this.deps.hosting.get(tabletRow);
    return tablet.mutex.run(async () => {
      if (options.compactor !== undefined) {
        if (tablet.stale) await this.deps.hosting.resync(tablet);
        this.owned(tablet, ecid, options.compactor);
      }
      return this.cancelLocked(tablet, ecid, reason, options.error);
    });
  }

  /** Cancels inside the tablet's mutex. */
  async cancelLocked(
    tablet: HostedTablet,
    ecid: string,
    reason: CancelReason,
    error?: string,
  ): Promise<boolean> {
    if (tablet.stale) await this.deps.hosting.resync(tablet);
    const r = tablet.meta.reservations.get(ecid);
    if (!r || tablet.state !== 'hosted') return false;
    // A compactor that vanished because its queue was deleted did not fail.
    if (reason === 'compactor-gone' && !(await this.deps.queueExists(r.queueId).catch(() => true)))
      reason = 'queue-deleted';
    const settings = await this.deps.configs.get(tablet.meta.tableId).catch(() => undefined);
    const key = failureKey(r.inputs);
    let failure: Failure | undefined;
    if (COUNTS_AS_FAILURE.has(reason)) {
      failure = {
        inputs: r.inputs,
        attempts: Math.max(tablet.meta.failures.get(key)?.attempts ?? 0, r.attempt) + 1,
        lastError: error ?? reason,
        at: Date.now(),
        parked: false,
        queueId: r.queueId,
        lastEcid: ecid,
      };
      failure.parked = isParked(failure, settings?.config.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    }
    let applied: boolean;
    try {
      applied = await this.deps.hosting.change(tablet, {
        conditions: [reservationExists(tablet.row, ecid), notEnded(ecid)],
        deletes: [
          { row: tablet.row, col: ecompCol(ecid) },
          { row: tablet.row, col: progressCol(ecid) },
        ],
        puts: [
          { row: delRow(r.output), col: 'at', value: String(Date.now()) },
          outcomeCell(
            ecid,
            ended(tablet, r, {
              outcome: 'cancelled',
              reason,
              ...(error === undefined ? {} : { error: error.slice(0, 1_000) }),
              at: Date.now(),
            }),
          ),
          ...(failure ? [{ row: tablet.row, col: failedCol(key), value: JSON.stringify(failure) }] : []),
        ],
        apply: (meta) => {
          meta.reservations.delete(ecid);
          meta.progress.delete(ecid);
          if (failure) meta.failures.set(key, failure);
        },
        replan: true,
      });
    } catch (err) {
      // Read back: gone is what we wanted, whoever did it.
      if (isUnknown(err) && !tablet.stale && !tablet.meta.reservations.has(ecid)) applied = true;
      else throw err;
    }
    if (!applied) return false;
    this.deps.watch.remove(r.compactor, ecid);
    tablet.forgetProgress(ecid);
    this.stats.cancelled++;
    this.deps.log.info(
      {
        tablet: tablet.row,
        ecid,
        reason,
        compactor: r.compactor,
        attempts: failure?.attempts,
        parked: failure?.parked ?? false,
      },
      'reservation cancelled',
    );
    return true;
  }

  /** A compactor's node disappeared: cancel all its reservations here (the reconciler retries failures). */
  onCompactorGone(refs: ReservationRef[]): void {
    for (const ref of refs) {
      this.cancel(ref.tablet, ref.ecid, 'compactor-gone').catch((err: unknown) =>
        this.deps.log.warn(
          { ...ref, err: describeError(err) },
          'could not cancel the reservation of a dead compactor yet',
        ),
      );
    }
  }

  /** Records a progress report; persisted at most every few seconds (fenced, and only while reserved). */
  async progress(
    tabletRow: string,
    ecid: string,
    compactor: string,
    progress: ProgressFigures,
  ): Promise<void> {
    const tablet = await this.deps.hosting.get(tabletRow);
    this.owned(tablet, ecid, compactor);
    const now = Date.now();
    // Only figures that moved count as progress: a compactor that keeps reporting the same numbers is stuck.
    // Written figures count too: a compactor that has read everything may still be writing its output.
    const seen = tablet.reported.get(ecid);
    const moved =
      !seen?.figures ||
      progress.entriesRead > seen.figures.entriesRead ||
      progress.bytesRead > seen.figures.bytesRead ||
      progress.entriesWritten > seen.figures.entriesWritten ||
      progress.bytesWritten > seen.figures.bytesWritten;
    tablet.reported.set(ecid, { movedAt: moved ? now : seen.movedAt, figures: progress });
    // Persisted when the store's copy is old enough; checked again in the mutex, so reports that queued
    // behind one write do not each write again.
    const due = (): boolean =>
      now - (tablet.meta.progress.get(ecid)?.at ?? 0) >= (this.deps.progressPersistMs ?? 5_000);
    if (!due()) return;
    const value: Progress = { ...progress, at: now };
    await tablet.mutex.run(async () => {
      if (!due()) return;
      await this.deps.hosting.change(tablet, {
        conditions: [reservationExists(tablet.row, ecid)],
        puts: [{ row: tablet.row, col: progressCol(ecid), value: JSON.stringify(value) }],
        apply: (meta) => meta.progress.set(ecid, value),
      });
    });
  }

  private async cancelStalled(stallMs: number): Promise<void> {
    const now = Date.now();
    for (const tablet of this.deps.hosting.all()) {
      for (const [ecid, r] of tablet.meta.reservations) {
        const last = tablet.reported.get(ecid)?.movedAt ?? r.reservedAt;
        if (now - last > stallMs) {
          this.deps.log.warn(
            { tablet: tablet.row, ecid, compactor: r.compactor, silentMs: now - last },
            'compaction made no progress',
          );
          await this.cancel(tablet.row, ecid, 'stalled', { error: `no progress for ${now - last} ms` }).catch(
            () => undefined,
          );
        }
      }
    }
  }
}
