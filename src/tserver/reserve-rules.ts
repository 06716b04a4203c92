/**
 * Reserve (rules.ts, rule 1), as pure functions: the request and the tablet's metadata in, the
 * reservation and its conditional change out. A repeated request (same request id and compactor: its
 * first answer was lost) gets the reservation it made. Otherwise the job is computed now from the
 * tablet's files (late binding): the first planned job for the compactor's queue, or the first kept job
 * to resume (resume-rules.ts), or the next sub-job of a split (split-rules.ts). A job large enough to
 * split is first answered `split`: the shell reads where to split it and asks again.
 */
import {
  COL_SELECTED,
  ecompCol,
  failureKey,
  resumeCol,
  rowsOf,
  splitCol,
  type Reservation,
  type Selection,
  type TabletMeta,
  tabletTime,
} from '../meta/tablet.js';
import type { TableConfig } from '../meta/table-config.js';
import type { Condition } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import type { ReserveRequest, ReservedJob } from '../queue/protocol.js';
import type { FilterSpec } from '../storage/index.js';
import { filesPresent, type RuleChange } from './rule-change.js';
import { keptJob, resumeOf } from './resume-rules.js';
import {
  boundsFit,
  newSplit,
  splitCount,
  splitPresent,
  subJobReservation,
  type SplitBounds,
} from './split-rules.js';
import { iteratorSettings } from './table-configs.js';
export type ReserveDecision =
  | { kind: 'repeat'; ecid: string; reservation: Reservation }
  | { kind: 'no-work' }
  /** The job is to be split: ask again with the rows to split it at (`ReserveContext.splitBounds`). */
  | { kind: 'split'; job: PlannedJob; parts: number }
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
  /**
   * Whether a job of all the tablet's files may drop delete markers now (HostedTablet.mayDropDeletes):
   * false while a batch stamped at or before the tablet's time is still to be applied.
   */
  mayDropDeletes: boolean;
  /** The rows the tablet server chose to split the job at, after a `split` decision. */
  splitBounds?: SplitBounds;
}

export function decideReserve(meta: TabletMeta, req: ReserveRequest, ctx: ReserveContext): ReserveDecision {
  if (req.requestId) {
    for (const [ecid, r] of meta.reservations) {
      if (r.requestId === req.requestId && r.compactor === req.compactor)
        return { kind: 'repeat', ecid, reservation: r };
    }
  }
  const job =
    keptJob(meta, req.queueId, ctx.config.maxAttempts) ??
    ctx.jobs.find((j) => j.queue !== undefined && ctx.queueIdOf(j.queue) === req.queueId);
  if (!job) return { kind: 'no-work' };
  if (job.split) return reserveSubJob(meta, req, ctx, job.split);
  const { resume, drop } = resumeOf(meta, job);
  // A kept job that drops deletes must go on doing so (its output is the bytes the first attempt was
  // writing), which it may not while a batch stamped before a marker is in flight: it waits (briefly: until
  // that batch is applied) rather than start over and throw its checkpoint away.
  if (resume?.settings.dropDeletes && !ctx.mayDropDeletes) return { kind: 'no-work' };
  const dropDeletes = job.allFiles && ctx.mayDropDeletes;
  const filters: FilterSpec[] = job.kind === 'user' ? (job.filters ?? []) : [];
  const userIds = job.kind === 'user' ? (job.userCompactionIds ?? []) : [];
  // A user job is planned on the tablet as it will be once its requests are selected: the selection it
  // runs is written with it (or with its split), so the requests it satisfies are exactly those recorded.
  const selection: Selection | undefined =
    job.kind === 'user' ? { ids: userIds, files: [...job.files].sort(), filters } : undefined;
  const parts = resume ? 1 : splitCount(job, ctx.config);
  if (parts > 1) {
    if (!ctx.splitBounds || !boundsFit(ctx.splitBounds, job)) return { kind: 'split', job, parts };
    if (ctx.splitBounds.bounds.length > 0) return reserveNewSplit(meta, req, ctx, job, drop, selection);
  }
  // A job resumed from a kept checkpoint runs with the settings and codec it was checkpointed under: its
  // output must be the bytes the first attempt was writing (resume-rules.ts).
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
          // The rows the first attempt was writing (absent: every row, from before tablets split).
          ...(resume.clip ? { clip: resume.clip } : {}),
          ...(resume.compression ? { compression: resume.compression } : {}),
          ...(resume.blockSize ? { blockSize: resume.blockSize } : {}),
          settings: resume.settings,
          checkpoint: resume.checkpoint,
          resumedBytes: resume.checkpoint.bytes,
        }
      : {
          clip: rowsOf(meta),
          compression: ctx.config.compression,
          blockSize: ctx.config.blockSize,
          settings: iteratorSettings(ctx.config, filters, dropDeletes, tabletTime(meta, ctx.now)),
        }),
  };
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

/** Reserves the next sub-job of a split (split-rules.ts, rule 2). */
function reserveSubJob(
  meta: TabletMeta,
  req: ReserveRequest,
  ctx: ReserveContext,
  ref: { id: string; index: number },
): ReserveDecision {
  const split = meta.splits.get(ref.id)!;
  const reservation = subJobReservation(meta, req, ref.id, split, ref.index, ctx);
  return reserveWith(meta, ctx, reservation, [splitPresent(meta.row, ref.id)]);
}

/** Splits a job and reserves its sub-job 0 (split-rules.ts, rule 1). */
function reserveNewSplit(
  meta: TabletMeta,
  req: ReserveRequest,
  ctx: ReserveContext,
  job: PlannedJob,
  drop: string[],
  selection: Selection | undefined,
): ReserveDecision {
  const { id, split, reservation, conditions } = newSplit(meta, req, job, ctx.splitBounds!.bounds, ctx);
  const decision = reserveWith(meta, ctx, reservation, conditions);
  if (decision.kind !== 'reserve') return decision;
  const { change } = decision;
  change.puts.push({ row: meta.row, col: splitCol(id), value: JSON.stringify(split) });
  if (selection) change.puts.push({ row: meta.row, col: COL_SELECTED, value: JSON.stringify(selection) });
  change.deletes.push(...drop.map((k) => ({ row: meta.row, col: resumeCol(k) })));
  return {
    ...decision,
    change: {
      ...change,
      apply: (m) => {
        m.splits.set(id, split);
        for (const k of drop) m.resumes.delete(k);
        if (selection) m.selection = selection;
        change.apply(m);
      },
    },
  };
}

function reserveWith(
  meta: TabletMeta,
  ctx: ReserveContext,
  reservation: Reservation,
  conditions: Condition[],
): ReserveDecision {
  const { ecid } = ctx;
  const job: PlannedJob = {
    kind: reservation.kind,
    files: reservation.inputs,
    inputBytes: reservation.inputs.reduce((n, f) => n + (meta.files.get(f)?.size ?? 0), 0),
    queue: undefined,
    priority: 0,
    allFiles: reservation.allFiles,
  };
  return {
    kind: 'reserve',
    ecid,
    reservation,
    job,
    change: {
      conditions: [...filesPresent(meta.row, reservation.inputs), ...conditions],
      puts: [{ row: meta.row, col: ecompCol(ecid), value: JSON.stringify(reservation) }],
      deletes: [],
      apply: (m) => {
        m.reservations.set(ecid, reservation);
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
    inputs: r.inputs.map((name) => {
      const f = meta.files.get(name);
      return { name, size: f?.size ?? 0, entries: f?.entries ?? 0, ...(f?.fence ? { fence: f.fence } : {}) };
    }),
    output: r.output,
    settings: r.settings,
    ...(r.compression ? { compression: r.compression } : {}),
    ...(r.blockSize ? { blockSize: r.blockSize } : {}),
    keepDeletes: !r.settings.dropDeletes,
    ...(r.clip ? { clip: r.clip } : {}),
    ...(r.split
      ? {
          range: {
            ...(r.split.start === undefined ? {} : { start: r.split.start }),
            ...(r.split.end === undefined ? {} : { end: r.split.end }),
          },
        }
      : {}),
    ...(r.checkpoint
      ? { checkpoint: { parts: r.checkpoint.parts, bytes: r.checkpoint.bytes, state: r.checkpoint.state } }
      : {}),
  };
}
