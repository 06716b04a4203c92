/**
 * The record of a user compaction (`admin table compact`), kept so it can be followed by its id after the
 * fact (`admin compactions status <id>`), and what its status looks like.
 *
 *   ~ucomp:<id>  request            → JSON {@link UserCompactionRecord}
 *                cancelled:<tablet> → JSON { at }: an admin cancelled it on that tablet before it ran there
 *
 * Written by the manager in the same mutations as the tablets' `compact:<id>` requests (the id is a ULID:
 * the rows sort by the time of the request), trimmed with the outcome rows after
 * `EXC_OUTCOME_RETENTION_MS`. Per tablet, the request itself lives on the tablet (`compact:<id>`, and
 * `selected` once selected); how it ended is in the outcome rows (`~done:<ecid>`) of the user jobs that
 * name it.
 */
import { z } from 'zod';
import { selectorsSchema } from './selectors.js';
import type { Cell } from './types.js';

export const UCOMP_PREFIX = '~ucomp:';
export const COL_REQUEST = 'request';

export const userCompactionRow = (id: string): string => `${UCOMP_PREFIX}${id}`;

const CANCELLED_PREFIX = 'cancelled:';
/** The cell recording that `id` was cancelled on tablet `row`: written with the request's deletion. */
export const cancelledCell = (id: string, row: string, at: number): Cell => ({
  row: userCompactionRow(id),
  col: `${CANCELLED_PREFIX}${row}`,
  value: JSON.stringify({ at }),
});

/** Tablet row → when the user compaction was cancelled there, from its record row's cells. */
export function cancelledTablets(cols: ReadonlyMap<string, string>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [col, value] of cols) {
    if (!col.startsWith(CANCELLED_PREFIX)) continue;
    let at = 0;
    try {
      at = Number((JSON.parse(value) as { at?: unknown }).at) || 0;
    } catch {
      // an unreadable time still records the cancellation
    }
    out.set(col.slice(CANCELLED_PREFIX.length), at);
  }
  return out;
}

export const userCompactionRecordSchema = z.object({
  tableId: z.string(),
  table: z.string(),
  tablets: z.array(z.string()),
  filters: z.array(z.object({ name: z.string(), options: z.unknown().optional() })),
  requestedAt: z.number(),
  /** The queue it was sent to (`--queue`); absent: the table's routes. */
  queue: z.string().optional(),
  /** Its selectors (`--select`, selectors.ts); absent: every file. */
  select: selectorsSchema.optional(),
});
export type UserCompactionRecord = z.infer<typeof userCompactionRecordSchema>;

export function parseUserCompactionRecord(value: string | undefined): UserCompactionRecord | undefined {
  if (value === undefined) return undefined;
  try {
    const parsed = userCompactionRecordSchema.safeParse(JSON.parse(value));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where a user compaction stands on one tablet:
 * - `pending`: requested, not selected yet (waits for an earlier request with other filters);
 * - `selected`: its files are chosen, the job waits for a compactor (or for a system job over them);
 * - `running`: a compactor holds the job (`ecid`, with its progress), or its job runs split into sub-jobs
 *   (`split`: from the first sub-job's reservation to the last commit);
 * - `done`: committed (`ecid`), or nothing to compact (no `ecid`: the tablet had no file);
 * - `cancelled`: an admin cancelled it there before it committed (`admin compactions cancel`);
 * - `gone`: the tablet no longer exists (its table was deleted).
 */
export type TabletCompactionState = 'pending' | 'selected' | 'running' | 'done' | 'cancelled' | 'gone';

/** The states in which a user compaction is over on a tablet. */
export const ENDED_STATES: ReadonlySet<TabletCompactionState> = new Set(['done', 'cancelled', 'gone']);

export interface TabletCompactionStatus {
  tablet: string;
  state: TabletCompactionState;
  /** The job: running, or the one that committed (not for a split job: see `split`). */
  ecid?: string;
  compactor?: string;
  /**
   * For a job split into sub-jobs (the table's `splitAbove`): the split's id and the reservations that
   * committed its sub-jobs, in row order (running: those that hold or committed them so far). No one
   * reservation is the job, so `ecid` and `compactor` are absent; `bytesRead` and `inputBytes` (running),
   * `ranMs` and `outputBytes` (done) are the whole job's.
   */
  split?: { id: string; ecids: string[] };
  /** Selected or running: the files its rewrite takes (the tablet's selection); done: those it rewrote. */
  files?: string[];
  /** For a running job: bytes read so far and the total of its inputs. */
  bytesRead?: number;
  inputBytes?: number;
  /**
   * For a committed job: when it ended, how long it ran, its output. A split job ran from its first
   * sub-job's reservation to its last sub-job's commit (wall-clock, not the sum of the sub-jobs' times:
   * they overlap, and it includes time a sub-job waited for a compactor or ran again), and its output is
   * all its sub-jobs' outputs together.
   */
  endedAt?: number;
  ranMs?: number;
  outputBytes?: number;
  /** Other requests the same rewrite satisfied (coalesced). */
  coalescedWith?: string[];
  /**
   * Attempts of its job so far that failed (an error, stalled, its compactor gone: the ends that count
   * towards parking it, so not a compactor gone after its checkpoint moved on; each sub-job's of a split,
   * where parking counts the sub-jobs of one attempt once), and the last one's error or reason. An attempt an admin cancelled, one its compactor let
   * go on shutting down and one whose queue was deleted are not counted: a tablet where the compaction
   * was cancelled reads `cancelled`, and a job cancelled by its ecid runs again (`admin compactions
   * history` still lists every attempt).
   */
  failedAttempts: number;
  lastError?: string;
}

/** What `GET /v1/user-compactions/:id` answers. */
export interface UserCompactionStatus {
  id: string;
  table: string;
  filters: UserCompactionRecord['filters'];
  /** The queue it was sent to (absent: the table's routes). */
  queue?: string;
  /** Its selectors (absent: every file). */
  select?: NonNullable<UserCompactionRecord['select']>;
  requestedAt: number;
  tablets: TabletCompactionStatus[];
  /** Every tablet done (or cancelled, or gone). */
  done: boolean;
  /** Tablets on which an admin cancelled it. */
  cancelled: number;
}
