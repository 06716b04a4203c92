/**
 * The life of a reservation on its tablet (DESIGN.md, "The life of a compaction", steps 3, 5 and 6), as
 * pure functions: a request and the tablet's metadata in, the conditional change to make and what to do
 * next out. reservations.ts is the I/O around them (the tablet's mutex, the metadata store, the compactor
 * watch, logs); what is decided is all here, in order.
 *
 * 1. Reserve. A repeated request (same request id and compactor: its first answer was lost) gets the
 *    reservation it made. Otherwise the job is computed now from the tablet's files (late binding): the
 *    first planned job for the compactor's queue. None: no work (the change then only replans, which
 *    removes the stale queue entry). A job: a reservation under a fresh ecid, conditional on every input
 *    still being a file of the tablet. Reservations never share a file: the planner skips reserved files,
 *    and the tablet's mutex serialises reserves.
 * 2. Commit. Only the compactor holding the reservation may commit it (the shell has checked that its
 *    node is alive, and that the output exists with the size it reports). One change, conditional on the
 *    reservation still existing, no outcome recorded for it yet, and its inputs still being the tablet's:
 *    the inputs are replaced by the output, the reservation deleted, the inputs marked for garbage
 *    collection, failure records about the inputs dropped, a user compaction it completes removed, and
 *    the outcome recorded.
 * 3. Cancel. Conditional on the reservation still existing and no outcome recorded: it is deleted, its
 *    output marked for garbage collection, the outcome recorded; when the reason counts as a failed
 *    attempt, the failure of its inputs is counted (and parked after the table's `maxAttempts`).
 *
 * Commit and cancel are both conditional on the reservation, so exactly one of them wins. Every change
 * also carries, added by the shell, the condition that the tablet is still hosted by this server's
 * session, and the tablet's new queue entries.
 *
 * When the metadata store did not confirm a change (its answer was lost), the tablet is read back and
 * {@link reserveHappened}, {@link commitHappened} and {@link cancelHappened} tell from what the store
 * holds whether it was applied.
 */
import { ExcError } from '../errors.js';
import { delRow } from '../meta/keys.js';
import { notEnded, outcomeCell, type Outcome } from '../meta/outcomes.js';
import { abandonedUserJobs, satisfiedBy, selectionAfterCommit } from '../queue/selection.js';
import {
  COL_SELECTED,
  compactCol,
  ecompCol,
  failedCol,
  failureKey,
  fileCol,
  isParked,
  progressCol,
  resumeCol,
  type Failure,
  type Reservation,
  type Selection,
  type TabletMeta,
} from '../meta/tablet.js';
import type { TableConfig } from '../meta/table-config.js';
import type { Cell, Condition } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import type { CommitRequest, ReserveRequest, ReservedJob } from '../queue/protocol.js';
import type { FilterSpec } from '../storage/index.js';
import { iteratorSettings } from './table-configs.js';
import { keptJob, keptResume, mootResumes, resumeCell, resumeOf } from './resume-rules.js';

/** Why a reservation ended without a commit. Only some count as failed attempts. */
export type CancelReason = 'compactor-gone' | 'failed' | 'stalled' | 'released' | 'admin' | 'queue-deleted';
const COUNTS_AS_FAILURE: ReadonlySet<CancelReason> = new Set(['compactor-gone', 'failed', 'stalled']);

/** A change to one tablet: the mutation's parts and what it does to the in-memory copy once applied. */
export interface RuleChange {
  conditions: Condition[];
  puts: Cell[];
  deletes: { row: string; col: string }[];
  apply: (meta: TabletMeta) => void;
}

/**
 * The condition that a reservation still exists. Its column is written under a fresh ULID, rewritten only
 * to record a checkpoint (which changes nothing a commit or cancel decides on), and then deleted, so being
 * there is enough (comparing values would tie every stored reservation to how today's schema
 * re-serialises it).
 */
const reservationExists = (row: string, ecid: string): Condition => ({
  op: 'present',
  row,
  col: ecompCol(ecid),
});

const filesPresent = (row: string, files: readonly string[]): Condition[] =>
  files.map((f) => ({ op: 'present' as const, row, col: fileCol(f) }));

// --- reserve ---------------------------------------------------------------------------------------------

export type ReserveDecision =
  | { kind: 'repeat'; ecid: string; reservation: Reservation }
  | { kind: 'no-work' }
  | {
      kind: 'reserve';
      ecid: string;
      reservation: Reservation;
      job: PlannedJob;
      change: RuleChange;
      /** The reservation whose checkpoint this one goes on from. */
      resumedFrom?: string;
    };

export interface ReserveContext {
  /** What the tablet wants now (the planner's jobs, with the table's settings). */
  jobs: readonly PlannedJob[];
  config: TableConfig;
  queueIdOf: (queueName: string) => string | undefined;
  /** A fresh ecid and output path, and the time (passed in: the rules draw nothing themselves). */
  ecid: string;
  output: string;
  now: number;
}

export function decideReserve(meta: TabletMeta, req: ReserveRequest, ctx: ReserveContext): ReserveDecision {
  if (req.requestId) {
    for (const [ecid, r] of meta.reservations) {
      if (r.requestId === req.requestId && r.compactor === req.compactor)
        return { kind: 'repeat', ecid, reservation: r };
    }
  }
  const job =
    keptJob(meta, req.queueId) ??
    ctx.jobs.find((j) => j.queue !== undefined && ctx.queueIdOf(j.queue) === req.queueId);
  if (!job) return { kind: 'no-work' };
  const filters: FilterSpec[] = job.kind === 'user' ? (job.filters ?? []) : [];
  const userIds = job.kind === 'user' ? (job.userCompactionIds ?? []) : [];
  // A job resumed from a kept checkpoint runs with the settings and codec it was checkpointed under: its
  // output must be the bytes the first attempt was writing (resume-rules.ts).
  const { resume, drop } = resumeOf(meta, job);
  const reservation: Reservation = {
    compactor: req.compactor,
    queueId: req.queueId,
    inputs: job.files,
    output: ctx.output,
    kind: job.kind,
    attempt: meta.failures.get(failureKey(job.files))?.attempts ?? 0,
    reservedAt: ctx.now,
    allFiles: job.allFiles,
    ...(userIds.length > 0 ? { userCompactionId: userIds[0], userCompactionIds: userIds } : {}),
    ...(req.requestId ? { requestId: req.requestId } : {}),
    ...(resume
      ? {
          ...(resume.compression ? { compression: resume.compression } : {}),
          settings: resume.settings,
          checkpoint: resume.checkpoint,
        }
      : {
          compression: ctx.config.compression,
          settings: iteratorSettings(ctx.config, filters, job.allFiles, ctx.now),
        }),
  };
  // A user job is planned on the tablet as it will be once its requests are selected: the selection it
  // runs is written with it, so the requests it satisfies are exactly those recorded.
  const selection: Selection | undefined =
    job.kind === 'user' ? { ids: userIds, files: [...job.files].sort(), filters } : undefined;
  const { ecid } = ctx;
  return {
    kind: 'reserve',
    ecid,
    reservation,
    job,
    ...(resume ? { resumedFrom: resume.fromEcid } : {}),
    change: {
      conditions: filesPresent(meta.row, job.files),
      puts: [
        { row: meta.row, col: ecompCol(ecid), value: JSON.stringify(reservation) },
        ...(selection ? [{ row: meta.row, col: COL_SELECTED, value: JSON.stringify(selection) }] : []),
      ],
      deletes: drop.map((k) => ({ row: meta.row, col: resumeCol(k) })),
      apply: (m) => {
        m.reservations.set(ecid, reservation);
        for (const k of drop) m.resumes.delete(k);
        if (selection) m.selection = selection;
      },
    },
  };
}

/** After a lost answer, read back: the reservation was made if it is there. */
export const reserveHappened = (meta: TabletMeta, ecid: string): boolean => meta.reservations.has(ecid);

/** What a reservation gives its compactor. */
export function reservedJob(meta: TabletMeta, ecid: string, r: Reservation): ReservedJob {
  return {
    ecid,
    tablet: meta.row,
    tableId: meta.tableId,
    queueId: r.queueId,
    kind: r.kind,
    attempt: r.attempt,
    inputs: r.inputs.map((name) => ({ name, ...(meta.files.get(name) ?? { size: 0, entries: 0 }) })),
    output: r.output,
    settings: r.settings,
    ...(r.compression ? { compression: r.compression } : {}),
    keepDeletes: !r.allFiles,
    ...(r.checkpoint
      ? { checkpoint: { parts: r.checkpoint.parts, bytes: r.checkpoint.bytes, state: r.checkpoint.state } }
      : {}),
  };
}

// --- commit and cancel ------------------------------------------------------------------------------------

/**
 * The reservation `ecid` of a tablet, which only the compactor holding it may commit, fail, release or
 * report on; RESERVATION_GONE when it does not exist (cancelled or committed) or is another's.
 */
export function ownedReservation(meta: TabletMeta, ecid: string, compactor: string): Reservation {
  const r = meta.reservations.get(ecid);
  if (!r || r.compactor !== compactor) {
    throw new ExcError(
      'RESERVATION_GONE',
      `reservation ${ecid} of ${meta.row} does not exist (cancelled or committed)`,
      {
        details: { ecid, tablet: meta.row },
      },
    );
  }
  return r;
}

/** The outcome row of reservation `r` of `meta`, ending now on `server`. */
function ended(
  meta: TabletMeta,
  r: Reservation,
  server: string,
  how: Pick<Outcome, 'outcome' | 'at'> &
    Partial<Pick<Outcome, 'reason' | 'error' | 'entries' | 'inputBytes' | 'outputBytes'>>,
): Outcome {
  const satisfied = r.kind === 'user' ? satisfiedBy(r) : [];
  return {
    ...how,
    ...(satisfied.length > 0 ? { userCompactionIds: satisfied } : {}),
    tablet: meta.row,
    queueId: r.queueId,
    compactor: r.compactor,
    kind: r.kind,
    inputs: r.inputs.length,
    reservedAt: r.reservedAt,
    server,
  };
}

/** The commit of reservation `r` (owned by the request's compactor, its output verified). */
export function decideCommit(
  meta: TabletMeta,
  r: Reservation,
  req: CommitRequest,
  ctx: { now: number; server: string },
): RuleChange {
  const { row } = meta;
  const output = req.output;
  // Failure records about any of the inputs are moot once they are compacted away.
  const moot = [...meta.failures]
    .filter(([, f]) => f.inputs.some((i) => r.inputs.includes(i)))
    .map(([k]) => k);
  const mootKept = mootResumes(meta, r.inputs);
  const now = String(ctx.now);
  const { satisfied, selection } = selectionAfterCommit(meta, r, output ? r.output : undefined);
  const inputBytes = r.inputs.reduce((sum, f) => sum + (meta.files.get(f)?.size ?? 0), 0);
  return {
    conditions: [reservationExists(row, req.ecid), notEnded(req.ecid), ...filesPresent(row, r.inputs)],
    deletes: [
      ...r.inputs.map((f) => ({ row, col: fileCol(f) })),
      { row, col: ecompCol(req.ecid) },
      { row, col: progressCol(req.ecid) },
      ...moot.map((k) => ({ row, col: failedCol(k) })),
      ...mootKept.map((k) => ({ row, col: resumeCol(k) })),
      ...satisfied.map((id) => ({ row, col: compactCol(id) })),
      ...(selection === null ? [{ row, col: COL_SELECTED }] : []),
    ],
    puts: [
      ...(output ? [{ row, col: fileCol(r.output), value: JSON.stringify(output) }] : []),
      ...(selection ? [{ row, col: COL_SELECTED, value: JSON.stringify(selection) }] : []),
      ...r.inputs.map((f) => ({ row: delRow(f), col: 'at', value: now })),
      outcomeCell(
        req.ecid,
        ended(meta, r, ctx.server, {
          outcome: 'committed',
          entries: output?.entries ?? 0,
          inputBytes,
          outputBytes: output?.size ?? 0,
          at: ctx.now,
        }),
      ),
    ],
    apply: (m) => {
      for (const f of r.inputs) m.files.delete(f);
      if (output) m.files.set(r.output, output);
      m.reservations.delete(req.ecid);
      m.progress.delete(req.ecid);
      for (const k of moot) m.failures.delete(k);
      for (const k of mootKept) m.resumes.delete(k);
      for (const id of satisfied) m.userCompactions.delete(id);
      if (selection === null) delete m.selection;
      else if (selection) m.selection = selection;
    },
  };
}

/** After a lost answer, read back: the commit happened if the reservation is gone and its inputs replaced. */
export function commitHappened(
  meta: TabletMeta,
  r: Reservation,
  ecid: string,
  output: CommitRequest['output'],
): boolean {
  return (
    !meta.reservations.has(ecid) &&
    r.inputs.every((f) => !meta.files.has(f)) &&
    (!output || meta.files.has(r.output))
  );
}

export interface CancelContext {
  now: number;
  server: string;
  error?: string;
  /** The table's `maxAttempts` (a failure that reaches it parks the job). */
  maxAttempts: number;
  /** Whether the reservation's queue still exists (a compactor that vanished with its queue did not fail). */
  queueExists: boolean;
}

export type CancelDecision =
  | { kind: 'none' }
  | {
      kind: 'cancel';
      r: Reservation;
      reason: CancelReason;
      failure?: Failure;
      /** Its checkpoint was kept with the requeued job (resume-rules.ts). */
      keptCheckpoint: boolean;
      change: RuleChange;
    };

export function decideCancel(
  meta: TabletMeta,
  ecid: string,
  reason: CancelReason,
  ctx: CancelContext,
): CancelDecision {
  const r = meta.reservations.get(ecid);
  if (!r) return { kind: 'none' };
  if (reason === 'compactor-gone' && !ctx.queueExists) reason = 'queue-deleted';
  const key = failureKey(r.inputs);
  let failure: Failure | undefined;
  // A user job whose requests were all cancelled is not retried: its failure is nothing to record.
  const abandoned = abandonedUserJobs(meta).includes(ecid);
  if (COUNTS_AS_FAILURE.has(reason) && !abandoned) {
    failure = {
      inputs: r.inputs,
      attempts: Math.max(meta.failures.get(key)?.attempts ?? 0, r.attempt) + 1,
      lastError: ctx.error ?? reason,
      at: ctx.now,
      parked: false,
      queueId: r.queueId,
      lastEcid: ecid,
    };
    failure.parked = isParked(failure, ctx.maxAttempts);
  }
  const kept = keptResume(r, ecid, reason, failure, abandoned);
  const { row } = meta;
  const error = ctx.error === undefined ? {} : { error: ctx.error.slice(0, 1_000) };
  return {
    kind: 'cancel',
    r,
    reason,
    ...(failure ? { failure } : {}),
    keptCheckpoint: kept !== undefined,
    change: {
      conditions: [reservationExists(row, ecid), notEnded(ecid)],
      deletes: [
        { row, col: ecompCol(ecid) },
        { row, col: progressCol(ecid) },
      ],
      puts: [
        { row: delRow(r.output), col: 'at', value: String(ctx.now) },
        outcomeCell(
          ecid,
          ended(meta, r, ctx.server, { outcome: 'cancelled', reason, ...error, at: ctx.now }),
        ),
        ...(failure ? [{ row, col: failedCol(key), value: JSON.stringify(failure) }] : []),
        ...(kept ? [resumeCell(meta, kept.key, kept.resume)] : []),
      ],
      apply: (m) => {
        m.reservations.delete(ecid);
        m.progress.delete(ecid);
        if (failure) m.failures.set(key, failure);
        if (kept) m.resumes.set(kept.key, kept.resume);
      },
    },
  };
}

/** After a lost answer, read back: gone is what a cancel wanted, whoever did it. */
export const cancelHappened = (meta: TabletMeta, ecid: string): boolean => !meta.reservations.has(ecid);
