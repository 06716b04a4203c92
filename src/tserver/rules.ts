/**
 * The life of a reservation on its tablet (DESIGN.md, "The life of a compaction", steps 3, 5 and 6), as
 * pure functions: a request and the tablet's metadata in, the conditional change to make and what to do
 * next out. reservations.ts is the I/O around them (the tablet's mutex, the metadata store, the compactor
 * watch, logs); what is decided is all here, in order.
 *
 * 1. Reserve (reserve-rules.ts). A repeated request (same request id and compactor: its first answer was
 *    lost) gets the reservation it made. Otherwise the job is computed now from the tablet's files (late
 *    binding): the first planned job for the compactor's queue. None: no work (the change then only
 *    replans, which removes the stale queue entry). A job: a reservation under a fresh ecid, conditional
 *    on every input still being a file of the tablet. Reservations never share a file — except the
 *    sub-jobs of one split job, which share its inputs and read disjoint rows (split-rules.ts): the
 *    planner skips reserved files, and the tablet's mutex serialises reserves.
 * 2. Commit. Only the compactor holding the reservation may commit it (the shell has checked that its
 *    node is alive, and that the output exists with the size it reports). One change, conditional on the
 *    reservation still existing, no outcome recorded for it yet, and its inputs still being the tablet's:
 *    the inputs are replaced by the output, the reservation deleted, the inputs marked for garbage
 *    collection, failure records about the inputs dropped, a user compaction it completes removed, and
 *    the outcome recorded. A sub-job's commit records its output in its split; the one that completes
 *    the split installs every sub-job's output.
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
import { FAILURE_REASONS, notEnded, outcomeCell, type Outcome, type WholeSplit } from '../meta/outcomes.js';
import { abandonedUserJobs, satisfiedBy, selectionAfterCommit } from '../queue/selection.js';
import {
  COL_SELECTED,
  COL_TIME,
  compactCol,
  ecompCol,
  failedCol,
  failureKey,
  fileCol,
  isParked,
  MAX_FAILED_ON,
  progressCol,
  resumeCol,
  splitCol,
  type Failure,
  type Reservation,
  type TabletMeta,
} from '../meta/tablet.js';
import type { CommitRequest } from '../queue/protocol.js';
import { statsFields, type FileFigures } from '../meta/file-stats.js';
import { keptResume, mootResumes, resumeCell } from './resume-rules.js';
import { filesPresent, reservationExists, type RuleChange } from './rule-change.js';
import {
  splitAfterCommit,
  splitOf,
  splitOutputs,
  splitPresent,
  subJobCommitHappened,
  wholeSplit,
} from './split-rules.js';

export type { RuleChange } from './rule-change.js';

/** Why a reservation ended without a commit. Only some count as failed attempts. */
export type CancelReason =
  | 'compactor-gone'
  | 'failed'
  | 'stalled'
  | 'released'
  | 'admin'
  | 'queue-deleted'
  /** Its tablet merged with others before it could finish (tablet-merges.ts). */
  | 'merge'
  /** Its table was taken offline (table-offline.ts), before or while its tablet was hosted here. */
  | 'table-offline';

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

/**
 * Whether reservation `ecid` is a user job none of whose requests is left (an admin cancelled them all):
 * it must not commit, and ends as cancelled (selection.ts, abandonedUserJobs).
 */
export function isAbandoned(meta: TabletMeta, ecid: string): boolean {
  return abandonedUserJobs(meta).includes(ecid);
}

/**
 * The outcome row of reservation `r` of `meta`, ending now on `server`. It names the user compactions the
 * job ran for, except on the commit of a sub-job that does not complete its split: only the commit that
 * installs the rewrite satisfies them (the status of a user compaction reads it so). A sub-job's outcome
 * names its split, and the commit that completes the split describes the whole job (`whole`).
 */
function ended(
  meta: TabletMeta,
  r: Reservation,
  server: string,
  how: Pick<Outcome, 'outcome' | 'at'> &
    Partial<Pick<Outcome, 'reason' | 'error' | 'progressed' | 'entries' | 'inputBytes' | 'outputBytes'>>,
  namesRequests = true,
  whole?: WholeSplit,
): Outcome {
  // A commit names the requests it satisfies: those still there (one cancelled meanwhile is not).
  const satisfied =
    r.kind === 'user' && namesRequests
      ? satisfiedBy(r).filter((id) => how.outcome !== 'committed' || meta.userCompactions.has(id))
      : [];
  return {
    ...how,
    ...(satisfied.length > 0 ? { userCompactionIds: satisfied } : {}),
    ...(r.split
      ? { split: { id: r.split.id, index: r.split.index, of: r.split.of, ...(whole ? { whole } : {}) } }
      : {}),
    tablet: meta.row,
    queueId: r.queueId,
    compactor: r.compactor,
    kind: r.kind,
    inputs: r.inputs.length,
    ...(r.kind === 'user' && how.outcome === 'committed' ? { files: r.inputs } : {}),
    reservedAt: r.reservedAt,
    server,
  };
}

/**
 * The commit of reservation `r` (owned by the request's compactor, its output verified). A commit that
 * installs a user compaction's rewrite is conditional on its requests (those this copy still holds)
 * being there: the manager cancels one by deleting `compact:<id>` without the tablet server, which may
 * not have heard yet, and a cancelled rewrite must not be installed. When that condition fails the
 * caller reads the requests again and decides anew ({@link isAbandoned}).
 */
export function decideCommit(
  meta: TabletMeta,
  r: Reservation,
  req: CommitRequest,
  ctx: { now: number; server: string },
): RuleChange {
  const { row } = meta;
  const output = req.output;
  const conditions = [reservationExists(row, req.ecid), notEnded(req.ecid), ...filesPresent(row, r.inputs)];
  const requests = r.kind === 'user' ? satisfiedBy(r).filter((id) => meta.userCompactions.has(id)) : [];
  const requestsPresent = requests.map((id) => ({ op: 'present' as const, row, col: compactCol(id) }));
  const inputBytes = r.inputs.reduce((sum, f) => sum + (meta.files.get(f)?.size ?? 0), 0);
  const committed = (share: number, completes: boolean, whole?: WholeSplit) =>
    outcomeCell(
      req.ecid,
      ended(
        meta,
        r,
        ctx.server,
        {
          outcome: 'committed',
          entries: output?.entries ?? 0,
          inputBytes: Math.round(inputBytes / share),
          outputBytes: output?.size ?? 0,
          ...(output && !r.split ? statsFields(output) : {}),
          at: ctx.now,
        },
        completes,
        whole,
      ),
    );
  const endReservation = [
    { row, col: ecompCol(req.ecid) },
    { row, col: progressCol(req.ecid) },
  ];
  if (r.split) {
    // A sub-job: its output waits in the split until the last one commits them all (split-rules.ts).
    const { id, split, index } = splitOf(meta, r);
    const after = splitAfterCommit(split, index, req.ecid, r.output, output);
    const outcome = committed(
      split.done.length,
      after.complete,
      after.complete ? wholeSplit(after.split) : undefined,
    );
    if (!after.complete) {
      return {
        conditions: [...conditions, splitPresent(row, id)],
        deletes: endReservation,
        puts: [{ row, col: splitCol(id), value: JSON.stringify(after.split) }, outcome],
        apply: (m) => {
          m.reservations.delete(req.ecid);
          m.progress.delete(req.ecid);
          m.splits.set(id, after.split);
        },
      };
    }
    const change = replaceInputs(meta, r, splitOutputs(id, after.split), ctx.now);
    return {
      conditions: [...conditions, splitPresent(row, id), ...requestsPresent],
      deletes: [...endReservation, ...change.deletes, { row, col: splitCol(id) }],
      puts: [...change.puts, outcome],
      apply: (m) => {
        m.reservations.delete(req.ecid);
        m.progress.delete(req.ecid);
        m.splits.delete(id);
        change.apply(m);
      },
    };
  }
  const change = replaceInputs(meta, r, output ? [{ name: r.output, ...output }] : [], ctx.now);
  return {
    conditions: [...conditions, ...requestsPresent],
    deletes: [...endReservation, ...change.deletes],
    puts: [...change.puts, committed(1, true)],
    apply: (m) => {
      m.reservations.delete(req.ecid);
      m.progress.delete(req.ecid);
      change.apply(m);
    },
  };
}

/**
 * What a commit does to the tablet's files beside ending its reservation: the inputs replaced by the
 * outputs and marked for garbage collection, failure records and kept checkpoints about the inputs
 * dropped (moot once they are compacted away), and the user compaction it completes or the selection it
 * changes. The tablet's time moves up to the job's `nowMs`: a scan after it never ages off less than the
 * compaction did, whatever the clock of the server answering it (meta/tablet.ts, tabletTime).
 */
function replaceInputs(
  meta: TabletMeta,
  r: Reservation,
  outputs: (FileFigures & { name: string; group?: string })[],
  now: number,
): Omit<RuleChange, 'conditions'> {
  const { row } = meta;
  const moot = [...meta.failures]
    .filter(([, f]) => f.inputs.some((i) => r.inputs.includes(i)))
    .map(([k]) => k);
  const mootKept = mootResumes(meta, r.inputs);
  const { satisfied, selection } = selectionAfterCommit(
    meta,
    r,
    outputs.map((o) => o.name),
  );
  return {
    deletes: [
      ...r.inputs.map((f) => ({ row, col: fileCol(f) })),
      ...moot.map((k) => ({ row, col: failedCol(k) })),
      ...mootKept.map((k) => ({ row, col: resumeCol(k) })),
      ...satisfied.map((id) => ({ row, col: compactCol(id) })),
      ...(selection === null ? [{ row, col: COL_SELECTED }] : []),
    ],
    puts: [
      ...outputs.map(({ name, ...file }) => ({ row, col: fileCol(name), value: JSON.stringify(file) })),
      ...(selection ? [{ row, col: COL_SELECTED, value: JSON.stringify(selection) }] : []),
      ...r.inputs.map((f) => ({ row: delRow(f), col: 'at', value: String(now) })),
      ...(r.settings.nowMs > meta.time ? [{ row, col: COL_TIME, value: String(r.settings.nowMs) }] : []),
    ],
    apply: (m) => {
      m.time = Math.max(m.time, r.settings.nowMs);
      for (const f of r.inputs) m.files.delete(f);
      for (const { name, ...file } of outputs) m.files.set(name, file);
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
  if (r.split) return subJobCommitHappened(meta, r, ecid);
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
  /** Compactors registered in the reservation's queue now (undefined: not known; see isParked). */
  queueCompactors?: number;
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
  const abandoned = isAbandoned(meta, ecid);
  // A compactor that died after recording a checkpoint past where its attempt started made progress the
  // next attempt keeps: a job killed again and again (compactors scaled down) is not a failing job, and
  // is never parked for it. A job that kills its compactors before any progress still is.
  const progressed =
    reason === 'compactor-gone' && r.checkpoint !== undefined && r.checkpoint.bytes > (r.resumedBytes ?? 0);
  if (FAILURE_REASONS.has(reason) && !abandoned && !progressed) {
    failure = {
      inputs: r.inputs,
      // Sub-jobs of a split run at once: those reserved at the same attempt count once, however many
      // die together (one compactor running several, or a scale-down killing several).
      attempts: r.split
        ? Math.max(meta.failures.get(key)?.attempts ?? 0, r.attempt + 1)
        : Math.max(meta.failures.get(key)?.attempts ?? 0, r.attempt) + 1,
      lastError: ctx.error ?? reason,
      at: ctx.now,
      parked: false,
      queueId: r.queueId,
      lastEcid: ecid,
      failedOn: [...new Set([...(meta.failures.get(key)?.failedOn ?? []), r.compactor])].slice(
        -MAX_FAILED_ON,
      ),
      ...(ctx.queueCompactors === undefined ? {} : { lone: ctx.queueCompactors <= 1 }),
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
          ended(meta, r, ctx.server, {
            outcome: 'cancelled',
            reason,
            ...error,
            ...(progressed ? { progressed: true as const } : {}),
            at: ctx.now,
          }),
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
