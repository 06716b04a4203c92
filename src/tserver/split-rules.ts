/**
 * Split jobs on the tablet (DESIGN.md, "Split jobs"), as pure functions beside rules.ts:
 *
 * 1. Split. A job with more input than the table's `splitAbove` is split by row range into
 *    ceil(input / splitAbove) sub-jobs (at most `maxSplits`), the ranges cut where the inputs' indexes put
 *    equal shares of their bytes (storage/split-rows.ts; the tablet server reads them first). The first
 *    reservation writes the split (`split:<id>`: inputs, settings, codec, the rows between the sub-jobs)
 *    and reserves sub-job 0 in the same mutation. No range is ever cut inside a row, so every cell, with
 *    its versions and delete markers, is decided by exactly one sub-job.
 * 2. Sub-jobs. Each sub-job that is neither done nor reserved is planned as work for the job's queue
 *    (queue/tablet-plan.ts); a compactor that reserves it gets the split's inputs, settings and codec and
 *    its range, and compacts only those rows into its own output. The split's inputs stay out of every
 *    other job (and of a new user compaction's job) from its creation to its last commit.
 * 3. Commit. A sub-job's commit records its output in the split; the commit that completes the last one
 *    replaces the inputs with every sub-job's output in one mutation, as a commit of the whole job would.
 * 4. Cancel. A sub-job that ends without a commit (its compactor died, failed, released it) is planned
 *    again; the outputs of the others stay in the split. A failure counts against the whole split (its
 *    failure record is keyed by its inputs) and parks it after the table's `maxAttempts`.
 * 5. User jobs. A split user job carries its requests and filters into every sub-job, and the commit of
 *    its last sub-job satisfies the requests, as the whole job's commit would. A user split none of whose
 *    requests is left (an admin cancelled them all) is abandoned: its sub-jobs are not planned, running
 *    ones are cancelled (selection.ts, abandonedUserJobs), and once none runs the split is dropped and the
 *    outputs of those done are marked for the collector (queue/selection.ts, userStep): a cancelled rewrite
 *    changes nothing.
 */
import { ExcError } from '../errors.js';
import type { WholeSplit } from '../meta/outcomes.js';
import { statsFields, type FileFigures } from '../meta/file-stats.js';
import type { TableConfig } from '../meta/table-config.js';
import {
  failureKey,
  rowsOf,
  splitCol,
  splitRange,
  type Reservation,
  type SplitJob,
  type TabletMeta,
  tabletTime,
} from '../meta/tablet.js';
import type { Condition } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import type { ReserveRequest } from '../queue/protocol.js';
import { iteratorSettings } from './table-configs.js';

/** Into how many sub-jobs a planned job is split (1: not split). */
export function splitCount(job: Pick<PlannedJob, 'inputBytes' | 'split'>, config: TableConfig): number {
  if (job.split) return 1;
  if (job.inputBytes <= config.splitAbove) return 1;
  return Math.min(config.maxSplits, Math.ceil(job.inputBytes / config.splitAbove));
}

/** The rows a tablet server chose to split a job at: for the job over exactly `files`. */
export interface SplitBounds {
  files: readonly string[];
  /** Hex rows, ascending; empty: the inputs could not be split (one row, or unreadable). */
  bounds: string[];
}

/** Whether `bounds` were chosen for `job`. */
export function boundsFit(bounds: SplitBounds, job: Pick<PlannedJob, 'files'>): boolean {
  return failureKey(bounds.files) === failureKey(job.files);
}

interface SubJobContext {
  ecid: string;
  output: string;
  now: number;
  config: TableConfig;
  /** Whether a job of all the tablet's files may drop delete markers now (reserve-rules.ts). */
  mayDropDeletes: boolean;
}

/** A new split of `job` at `bounds`, and the reservation of its sub-job 0 (rule 1). */
export function newSplit(
  meta: TabletMeta,
  req: ReserveRequest,
  job: PlannedJob,
  bounds: string[],
  ctx: SubJobContext,
): { id: string; split: SplitJob; reservation: Reservation; conditions: Condition[] } {
  const id = ctx.ecid;
  const user = job.kind === 'user';
  const userIds = user ? (job.userCompactionIds ?? []) : [];
  const split: SplitJob = {
    inputs: job.files,
    kind: job.kind,
    allFiles: job.allFiles,
    clip: rowsOf(meta),
    compression: ctx.config.compression,
    blockSize: ctx.config.blockSize,
    settings: iteratorSettings(
      ctx.config,
      user ? (job.filters ?? []) : [],
      // Decided once for every sub-job: a batch stamped after the split was made comes after every marker
      // in its inputs.
      job.allFiles && ctx.mayDropDeletes,
      tabletTime(meta, ctx.now),
    ),
    ...(userIds.length > 0 ? { userCompactionIds: userIds } : {}),
    bounds,
    done: Array.from({ length: bounds.length + 1 }, () => null),
    createdAt: ctx.now,
  };
  return {
    id,
    split,
    reservation: subJobReservation(meta, req, id, split, 0, ctx),
    conditions: [{ op: 'absent', row: meta.row, col: splitCol(id) }],
  };
}

/** The reservation of sub-job `index` of split `id` for the requesting compactor (rule 2). */
export function subJobReservation(
  meta: TabletMeta,
  req: ReserveRequest,
  id: string,
  split: SplitJob,
  index: number,
  ctx: Pick<SubJobContext, 'output' | 'now'>,
): Reservation {
  const userIds = split.userCompactionIds ?? [];
  return {
    compactor: req.compactor,
    queueId: req.queueId,
    inputs: split.inputs,
    output: ctx.output,
    kind: split.kind,
    attempt: meta.failures.get(failureKey(split.inputs))?.attempts ?? 0,
    reservedAt: ctx.now,
    allFiles: split.allFiles,
    ...(userIds.length > 0 ? { userCompactionId: userIds[0], userCompactionIds: userIds } : {}),
    ...(req.requestId ? { requestId: req.requestId } : {}),
    ...(split.clip ? { clip: split.clip } : {}),
    ...(split.compression ? { compression: split.compression } : {}),
    ...(split.blockSize ? { blockSize: split.blockSize } : {}),
    settings: split.settings,
    split: { id, index, of: split.done.length, ...splitRange(split, index) },
  };
}

/** The split a sub-job's reservation belongs to; INTERNAL if the tablet lost it (never written apart). */
export function splitOf(meta: TabletMeta, r: Reservation): { id: string; split: SplitJob; index: number } {
  const ref = r.split;
  const split = ref && meta.splits.get(ref.id);
  if (!ref || !split) {
    throw new ExcError('INTERNAL', `split ${ref?.id ?? '?'} of ${meta.row} is missing for its sub-job`);
  }
  return { id: ref.id, split, index: ref.index };
}

/**
 * The split after sub-job `index` committed `output` under reservation `ecid` (rule 3), and whether that
 * was its last.
 */
export function splitAfterCommit(
  split: SplitJob,
  index: number,
  ecid: string,
  name: string,
  output: FileFigures | null,
): { split: SplitJob; complete: boolean } {
  const done = split.done.map((d, i) =>
    i === index
      ? {
          output: output ? name : null,
          size: output?.size ?? 0,
          entries: output?.entries ?? 0,
          ...(output ? statsFields(output) : {}),
          ecid,
        }
      : d,
  );
  return { split: { ...split, done }, complete: done.every((d) => d !== null) };
}

/**
 * The whole job, for the outcome of the commit that completes split `split` (its own figures are only its
 * share): when the split was made (its first sub-job reserved), the reservations that committed its
 * sub-jobs in row order, and their outputs' bytes and entries together.
 */
export function wholeSplit(split: SplitJob): WholeSplit {
  const parts = split.done.flatMap((d) => (d ? [d] : []));
  return {
    createdAt: split.createdAt,
    ecids: parts.flatMap((d) => (d.ecid === undefined ? [] : [d.ecid])),
    outputBytes: parts.reduce((n, d) => n + d.size, 0),
    entries: parts.reduce((n, d) => n + d.entries, 0),
  };
}

/** The files a complete split installs: every sub-job's output that holds anything, tagged with the split. */
export function splitOutputs(id: string, split: SplitJob): (FileFigures & { name: string; group: string })[] {
  return split.done.flatMap((d) =>
    d?.output ? [{ name: d.output, size: d.size, entries: d.entries, ...statsFields(d), group: id }] : [],
  );
}

/** After a lost answer, read back: a sub-job's commit happened if its result is in the split, or the split is done. */
export function subJobCommitHappened(meta: TabletMeta, r: Reservation, ecid: string): boolean {
  if (meta.reservations.has(ecid) || !r.split) return false;
  const split = meta.splits.get(r.split.id);
  if (split) {
    const done = split.done[r.split.index];
    return done != null && (done.output === null || done.output === r.output);
  }
  return r.inputs.every((f) => !meta.files.has(f));
}

/** The condition that a split still exists. */
export const splitPresent = (row: string, id: string): Condition => ({
  op: 'present',
  row,
  col: splitCol(id),
});
