/**
 * The record of a user compaction (`admin table compact`), kept so it can be followed by its id after the
 * fact (`admin compactions status <id>`), and what its status looks like.
 *
 *   ~ucomp:<id>  request → JSON {@link UserCompactionRecord}
 *
 * Written by the manager in the same mutations as the tablets' `compact:<id>` requests (the id is a ULID:
 * the rows sort by the time of the request), trimmed with the outcome rows after
 * `EXC_OUTCOME_RETENTION_MS`. Per tablet, the request itself lives on the tablet (`compact:<id>`, and
 * `selected` once selected); how it ended is in the outcome rows (`~done:<ecid>`) of the user jobs that
 * name it.
 */
import { z } from 'zod';

export const UCOMP_PREFIX = '~ucomp:';
export const COL_REQUEST = 'request';

export const userCompactionRow = (id: string): string => `${UCOMP_PREFIX}${id}`;

export const userCompactionRecordSchema = z.object({
  tableId: z.string(),
  table: z.string(),
  tablets: z.array(z.string()),
  filters: z.array(z.object({ name: z.string(), options: z.unknown().optional() })),
  requestedAt: z.number(),
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
 * - `running`: a compactor holds the job (`ecid`, with its progress);
 * - `done`: committed (`ecid`), or nothing to compact (no `ecid`: the tablet had no file);
 * - `gone`: the tablet no longer exists (its table was deleted).
 */
export type TabletCompactionState = 'pending' | 'selected' | 'running' | 'done' | 'gone';

export interface TabletCompactionStatus {
  tablet: string;
  state: TabletCompactionState;
  /** The job: running, or the one that committed. */
  ecid?: string;
  compactor?: string;
  /** For a running job: bytes read so far and the total of its inputs. */
  bytesRead?: number;
  inputBytes?: number;
  /** For a committed job: when it ended, how long it ran, its output. */
  endedAt?: number;
  ranMs?: number;
  outputBytes?: number;
  /** Other requests the same rewrite satisfied (coalesced). */
  coalescedWith?: string[];
  /** Failed or cancelled attempts of its job so far, and the last one's reason or error. */
  failedAttempts: number;
  lastError?: string;
}

/** What `GET /v1/user-compactions/:id` answers. */
export interface UserCompactionStatus {
  id: string;
  table: string;
  filters: UserCompactionRecord['filters'];
  requestedAt: number;
  tablets: TabletCompactionStatus[];
  /** Every tablet done (or gone). */
  done: boolean;
}
