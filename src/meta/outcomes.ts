/**
 * How each external compaction ended: one `~done:<ecid>` row per reservation, written by the same
 * conditional mutation that commits or cancels it (DESIGN.md, "Metadata store").
 *
 *   ~done:<ecid>  outcome → JSON {@link Outcome}
 *
 * The commit and the cancel both carry the condition that this cell is absent, so a reservation can end
 * at most once even if its `ecomp` column were somehow written again, and the row is the durable answer
 * to "what became of compaction X" after its reservation is gone: for operators (`admin compactions
 * history`, a cancel of a job that already finished), and for the chaos run, which counts outcomes per
 * reservation. Rows older than the retention are trimmed by the manager's garbage collector.
 */
import { z } from 'zod';
import { fileStatsFields } from './file-stats.js';
import type { Condition } from './types.js';

export const DONE_PREFIX = '~done:';
export const COL_OUTCOME = 'outcome';

export const doneRow = (ecid: string): string => `${DONE_PREFIX}${ecid}`;

/**
 * The reasons of a cancel that count as a failed attempt: the attempt's own end, not someone stopping it
 * (released, admin, queue-deleted). They count towards parking a job (tserver/rules.ts) and in a user
 * compaction's status, except a death after progress (`progressed`), and all of them in the monitor's
 * failures per minute (which counts ends by reason).
 */
export const FAILURE_REASONS: ReadonlySet<string> = new Set(['failed', 'stalled', 'compactor-gone']);

export const outcomeSchema = z.object({
  outcome: z.enum(['committed', 'cancelled']),
  /** Why a cancelled reservation ended (compactor-gone, failed, stalled, released, admin, queue-deleted, merge, table-deleted). */
  reason: z.string().optional(),
  error: z.string().optional(),
  /**
   * For a cancel whose compactor died (`compactor-gone`) after a checkpoint past where its attempt
   * started: the end is no failed attempt (it counts neither towards parking the job, tserver/rules.ts,
   * nor in a user compaction's status), and the next attempt resumes from that checkpoint when it was
   * kept (not for a job nobody wants any more: resume-rules.ts).
   */
  progressed: z.literal(true).optional(),
  tablet: z.string(),
  queueId: z.string(),
  compactor: z.string(),
  kind: z.enum(['system', 'user']),
  inputs: z.number().int().nonnegative(),
  /** For a user job's commit: the files it rewrote (what its selection chose). */
  files: z.array(z.string()).optional(),
  /** Entries written, for a commit (0: the output was empty). */
  entries: z.number().int().nonnegative().optional(),
  /** Bytes of the inputs and of the output, for a commit. */
  inputBytes: z.number().int().nonnegative().optional(),
  outputBytes: z.number().int().nonnegative().optional(),
  /** The output's statistics, for a commit of a job that is not a split's (meta/file-stats.ts). */
  ...fileStatsFields,
  /** For a user job: the user compactions (`admin table compact` ids) it satisfies. */
  userCompactionIds: z.array(z.string()).optional(),
  /**
   * For a sub-job of a split job (DESIGN.md, "Split jobs"): its split's id, its index and how many there
   * are. The figures above are the sub-job's own (its share); the commit that completes the split (its
   * last sub-job's, which installs every output) also carries the whole job's in `whole`.
   */
  split: z
    .object({
      id: z.string(),
      index: z.number().int().nonnegative(),
      of: z.number().int().positive(),
      whole: z
        .object({
          /** When the split was made: its first sub-job's reservation. */
          createdAt: z.number(),
          /** The reservations that committed its sub-jobs, in row order. */
          ecids: z.array(z.string()),
          /** Bytes and entries of all its sub-jobs' outputs. */
          outputBytes: z.number().int().nonnegative(),
          entries: z.number().int().nonnegative(),
        })
        .optional(),
    })
    .optional(),
  reservedAt: z.number(),
  /** When the tablet server decided (just before its mutation was applied). */
  at: z.number(),
  /** The tablet server that applied it. */
  server: z.string(),
});
export type Outcome = z.infer<typeof outcomeSchema>;
/** The whole of a split job, as the outcome of the commit that completed it carries it. */
export type WholeSplit = NonNullable<NonNullable<Outcome['split']>['whole']>;

/** The condition that no outcome was recorded for `ecid` yet. */
export function notEnded(ecid: string): Condition {
  return { op: 'absent', row: doneRow(ecid), col: COL_OUTCOME };
}

/** The cell recording how `ecid` ended. */
export function outcomeCell(ecid: string, outcome: Outcome): { row: string; col: string; value: string } {
  return { row: doneRow(ecid), col: COL_OUTCOME, value: JSON.stringify(outcome) };
}

/** Parses a stored outcome row; undefined for a malformed one (never fatal for a listing). */
export function parseOutcome(value: string): Outcome | undefined {
  try {
    const parsed = outcomeSchema.safeParse(JSON.parse(value));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** One ended compaction, as `GET /v1/compactions/history` shows it. */
export interface HistoryEntry extends Outcome {
  ecid: string;
  /** The table's name (its id when the table is gone). */
  table: string;
}

/** What `GET /v1/compactions/history` answers. */
export interface HistoryAnswer {
  outcomes: HistoryEntry[];
  /** Over everything the filters select: commits, and cancels by reason. */
  counts: { committed: number; cancelled: Record<string, number> };
  /** Pass as `before` for the next (older) page. */
  next: string | null;
}
