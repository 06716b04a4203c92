/**
 * The records a tablet row keeps beside its files and reservations (meta/tablet.ts lists its columns):
 * the progress a compactor reported, user compaction requests and their selection, and the failures of
 * jobs over a set of files.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { selectorsSchema } from './selectors.js';

export const progressSchema = z.object({
  at: z.number(),
  entriesRead: z.number().nonnegative(),
  entriesWritten: z.number().nonnegative(),
  bytesRead: z.number().nonnegative(),
  bytesWritten: z.number().nonnegative(),
  bytesComposed: z.number().nonnegative().optional(),
});
export type Progress = z.infer<typeof progressSchema>;

export const userCompactionSchema = z.object({
  requestedAt: z.number(),
  filters: z.array(z.object({ name: z.string(), options: z.unknown().optional() })).default([]),
  /** The queue its job goes to whatever its size (`--queue`); absent: the table's routes decide. */
  queue: z.string().optional(),
  /** Which files it rewrites (`--select`, selectors.ts); absent: every file. */
  select: selectorsSchema.min(1).optional(),
});
export type UserCompaction = z.infer<typeof userCompactionSchema>;

/**
 * A user compaction's selection (DESIGN.md, "The life of a compaction"): made as soon as a request is seen,
 * it holds every file the tablet had then (their data is what the requests asked to rewrite). From then on
 * system compactions run only over files outside it, and the user job runs over exactly these files once
 * none of them is reserved (files reserved by a system job started before the selection stay in it; that
 * job's output replaces them here when it commits). Never changed in place: replaced whole.
 */
export const selectionSchema = z.object({
  /** The user compactions it satisfies, oldest first. */
  ids: z.array(z.string()).min(1),
  files: z.array(z.string()),
  filters: z.array(z.object({ name: z.string(), options: z.unknown().optional() })),
  /** The requests' queue (they coalesce only with requests of the same queue). */
  queue: z.string().optional(),
  /** The requests' selectors (they coalesce only with requests of the same); absent: every file. */
  select: selectorsSchema.min(1).optional(),
});
export type Selection = z.infer<typeof selectionSchema>;

export const failureSchema = z.object({
  inputs: z.array(z.string()),
  attempts: z.number().int().nonnegative(),
  lastError: z.string(),
  at: z.number(),
  parked: z.boolean().default(false),
  /** The queue and reservation of the last failed attempt (for admins). */
  queueId: z.string().optional(),
  lastEcid: z.string().optional(),
  /** The compactors its attempts failed on, oldest first (at most {@link MAX_FAILED_ON}). */
  failedOn: z.array(z.string()).optional(),
  /**
   * Whether its queue had one compactor at most when it last failed (absent: not known, as for records
   * written before compactors were counted).
   */
  lone: z.boolean().optional(),
});
export type Failure = z.infer<typeof failureSchema>;

/** Compactors a failure record names. */
export const MAX_FAILED_ON = 8;

/**
 * Whether a job is parked: it failed as often as the table allows, on at least two compactors — one sick
 * compactor (a full disk, a store it cannot write) fails every job it takes, and its failures must not
 * park jobs that would succeed elsewhere. A queue of one compactor has no second opinion: there the
 * attempts alone decide (and the compactor's own back-off spaces them: compactor/health.ts). Decided
 * against the table's current `maxAttempts`, so raising the setting releases parked jobs (the stored
 * `parked` flag records what held when the last attempt failed).
 */
export function isParked(failure: Failure, maxAttempts: number): boolean {
  if (failure.attempts < maxAttempts) return false;
  const secondOpinion =
    failure.failedOn === undefined || failure.failedOn.length >= 2 || failure.lone !== false;
  return secondOpinion;
}

/** Failures are recorded per set of input files: the key of a job's `failed:<key>` column. */
export function failureKey(inputs: readonly string[]): string {
  return createHash('sha256')
    .update([...inputs].sort().join('\n'))
    .digest('hex')
    .slice(0, 24);
}
