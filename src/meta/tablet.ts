/**
 * The columns of a tablet row (DESIGN.md, "Metadata store") and their values:
 *
 *   prev            JSON hex of the previous tablet's end row, or null for a table's first tablet
 *   loc             JSON { server, session }: the hosting tablet server and its ZooKeeper session
 *   future          JSON { server, session }: assigned by the manager, not yet loaded
 *   file:<name>     JSON {@link FileMeta}: a file of the tablet, its figures and statistics (the tablet's
 *                   share of them, estimated when a split shared it: file-stats.ts), fence and group
 *   ecomp:<ecid>    JSON reservation: an external compaction in progress
 *   compact:<id>    JSON user compaction request
 *   requests        the id of the last user compaction the manager asked of this tablet (it writes it with
 *                   every `compact:<id>`): a split or merge decided from a copy that has not seen a request
 *                   yet is conditional on it, and refused, so a new tablet never misses one
 *   selected        JSON {@link Selection}: the files the tablet's next user compaction will rewrite and
 *                   the requests it satisfies (coalesced: consecutive requests with the same filters)
 *   resume:<key>    JSON {@link Resume}: the last checkpoint of a job whose compactor died, kept with the
 *                   requeued job (key: {@link failureKey} of its inputs) for the next attempt to go on from
 *   split:<id>      JSON {@link SplitJob}: a large job split by row range into sub-jobs that different
 *                   compactors run; the outputs of those done so far, until the last one commits them all
 *   hold:<ecid>     JSON {@link Hold}: this tablet's share in a compaction reserved on its sibling before
 *                   they split (holds.ts)
 *   progress:<ecid> JSON progress of a reservation, as last reported by its compactor (throttled)
 *   failed:<key>    JSON { inputs, attempts, lastError, parked }: failures of a job over a set of files
 *   queued:<qid>    the ~cq row this tablet currently has in queue <qid> (to move or delete it atomically)
 *   ver             the number of changes its hosting tablet servers made to it: every change is
 *                   conditional on it, so none is decided from an out-of-date copy
 *   time            the tablet's clock ({@link tabletTime}): the newest timestamp a tablet server gave
 *                   ingested entries and the newest `nowMs` a committed compaction used
 *
 * Every tablet mutation of a tablet server is conditional on `loc` naming it and its session.
 *
 * Beside it, the row `~ingest:<tablet row>` holds the tablet's applied ingest request ids (ingest-ids.ts).
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { COMPRESSIONS } from '../compressions.js';
import { tableIteratorsSchema } from '../table-iterators.js';
import { fileStatsFields } from './file-stats.js';
import { HOLD_PREFIX, holdSchema, type Hold } from './holds.js';
import { INGEST_PREFIX, parseIngestRecord, type IngestRecord } from './ingest-ids.js';
export { INGEST_PREFIX } from './ingest-ids.js';
import { parseTabletRow, type EndRow } from './keys.js';
import { hexRangeSchema, tabletRows, type HexRange } from './rows.js';
import {
  failureSchema,
  progressSchema,
  selectionSchema,
  userCompactionSchema,
  type Failure,
  type Progress,
  type Selection,
  type UserCompaction,
} from './tablet-records.js';

export * from './tablet-records.js';

export const COL_PREV = 'prev';
export const COL_LOC = 'loc';
export const COL_FUTURE = 'future';
export const COL_VERSION = 'ver';
export const COL_TIME = 'time';
export const COL_SELECTED = 'selected';
export const COL_REQUESTS = 'requests';
export const FILE_PREFIX = 'file:';
export const ECOMP_PREFIX = 'ecomp:';
export const COMPACT_PREFIX = 'compact:';
export const FAILED_PREFIX = 'failed:';
export const PROGRESS_PREFIX = 'progress:';
export const QUEUED_PREFIX = 'queued:';
export const RESUME_PREFIX = 'resume:';
export const SPLIT_PREFIX = 'split:';

export const fileCol = (name: string): string => `${FILE_PREFIX}${name}`;
export const ecompCol = (ecid: string): string => `${ECOMP_PREFIX}${ecid}`;
export const compactCol = (id: string): string => `${COMPACT_PREFIX}${id}`;
export const failedCol = (key: string): string => `${FAILED_PREFIX}${key}`;
export const progressCol = (ecid: string): string => `${PROGRESS_PREFIX}${ecid}`;
export const queuedCol = (queueId: string): string => `${QUEUED_PREFIX}${queueId}`;
export const resumeCol = (key: string): string => `${RESUME_PREFIX}${key}`;
export const splitCol = (id: string): string => `${SPLIT_PREFIX}${id}`;

export const locationSchema = z.object({
  server: z.string().min(1),
  session: z.string().regex(/^[0-9a-f]{16}$/),
});
export type Location = z.infer<typeof locationSchema>;
/** What a tablet server's submission names to be fenced: its own location (address and session). */
export type Fence = Location;

export const fileMetaSchema = z.object({
  /** Bytes and entries of the file in this tablet's rows (the whole file's, unless a split shared it). */
  size: z.number().int().nonnegative(),
  entries: z.number().int().nonnegative(),
  /** What was recorded as it was written: deletes, timestamps, key and value bytes, families (file-stats.ts). */
  ...fileStatsFields,
  /** Its counts are a share estimated in proportion to bytes (a split, an import's piece, a hold). */
  estimated: z.literal(true).optional(),
  /**
   * The split job that wrote it: the outputs of one split hold disjoint row ranges of one compaction, and
   * the planner weighs them as one file (queue/tablet-plan.ts).
   */
  group: z.string().min(1).optional(),
  /**
   * The rows of the file this tablet reads, ascending and disjoint (rows.ts): set by a merge, for a file
   * that only some of the merged tablets referenced (the rest of its rows are no longer theirs). Absent:
   * every row of the tablet.
   */
  fence: z.array(hexRangeSchema).min(1).optional(),
});
export type FileMeta = z.infer<typeof fileMetaSchema>;

/**
 * A checkpoint of a compaction's output (storage/parts.ts): the parts in the object store that hold its
 * first `bytes` bytes, and the writer's state after them (opaque here: the storage layer's encoding).
 */
export const checkpointSchema = z.object({
  parts: z.array(z.object({ name: z.string().min(1), size: z.number().int().nonnegative() })).min(1),
  bytes: z.number().int().positive(),
  state: z.string().min(1),
  /** When the tablet server recorded it. */
  at: z.number(),
});
export type CheckpointMeta = z.infer<typeof checkpointSchema>;

const hexRow = z.string().regex(/^(?:[0-9a-f]{2})*$/);

export const reservationSchema = z.object({
  /** The compactor's ephemeral node path: its identity. */
  compactor: z.string().min(1),
  queueId: z.string(),
  inputs: z.array(z.string()).min(1),
  output: z.string().min(1),
  kind: z.enum(['system', 'user']),
  /** Failed attempts on these inputs before this one (the attempt count survives cancels). */
  attempt: z.number().int().nonnegative(),
  reservedAt: z.number(),
  /** True when the inputs are all of the tablet's files: delete markers may be dropped. */
  allFiles: z.boolean(),
  /**
   * The rows the job reads and its output covers: the tablet's when reserved (rows.ts). Absent in a
   * reservation made before tablets split: every row (its tablet's files held no other).
   */
  clip: hexRangeSchema.optional(),
  /** The first user compaction a user job satisfies (kept for reservations made before coalescing). */
  userCompactionId: z.string().optional(),
  /** Every user compaction a user job satisfies (coalesced requests). */
  userCompactionIds: z.array(z.string()).optional(),
  /** The compactor's name for the reserve request that made it (a repeated request finds it). */
  requestId: z.string().optional(),
  /** Block codec of the output: the table's, when reserved. Absent in reservations made before it existed. */
  compression: z.enum(COMPRESSIONS).optional(),
  /** Data block size of the output: the table's, when reserved. Absent: the default (64 KiB). */
  blockSize: z.number().int().positive().optional(),
  /** What the iterator stack keeps, fixed when reserved (so retries of a job are deterministic). */
  settings: z.object({
    versions: z.number().int().min(1),
    ttlMs: z.number().int().positive().optional(),
    nowMs: z.number(),
    filters: z.array(z.object({ name: z.string(), options: z.unknown().optional() })),
    dropDeletes: z.boolean(),
    /** The table's iterators when reserved (src/table-iterators.ts); absent: none. */
    table: tableIteratorsSchema.optional(),
  }),
  /**
   * The last checkpoint its compactor reported (updated at most every `EXC_CHECKPOINT_PERSIST_*`), or the
   * one it was resumed from.
   */
  checkpoint: checkpointSchema.optional(),
  /** The bytes of the checkpoint this attempt resumed from: it made progress if it recorded more. */
  resumedBytes: z.number().int().nonnegative().optional(),
  /**
   * A sub-job of a split job (`split:<id>`): it compacts only the rows in [start, end) of the inputs
   * (hex; an absent end is unbounded) into its own output, which the split's last commit installs.
   */
  split: z
    .object({
      id: z.string().min(1),
      index: z.number().int().nonnegative(),
      of: z.number().int().min(2),
      start: hexRow.optional(),
      end: hexRow.optional(),
    })
    .optional(),
});
export type Reservation = z.infer<typeof reservationSchema>;

/** One sub-job's result in a split job: its output (null when nothing survived the stack). */
export const splitPartSchema = z.object({
  output: z.string().min(1).nullable(),
  size: z.number().int().nonnegative(),
  entries: z.number().int().nonnegative(),
  ...fileStatsFields,
  /** The reservation that committed it (absent in a part recorded before it was kept). */
  ecid: z.string().optional(),
});
export type SplitPart = z.infer<typeof splitPartSchema>;

/**
 * A job split by row range (DESIGN.md, "Split jobs"): sub-job i compacts the rows of `inputs` in
 * [bounds[i-1], bounds[i]) (the first from the start, the last to the end), each reserved on its own.
 * `done[i]` is sub-job i's committed output; the commit that completes the last one replaces the inputs
 * with every output in one mutation. The inputs stay out of every other job until then. A split user job
 * names the user compactions it satisfies (`userCompactionIds`, as its sub-jobs' reservations do).
 */
export const splitJobSchema = reservationSchema
  .pick({
    inputs: true,
    kind: true,
    allFiles: true,
    clip: true,
    compression: true,
    blockSize: true,
    settings: true,
    userCompactionIds: true,
  })
  .extend({
    /** The rows that separate the sub-jobs, hex, ascending: one fewer than the sub-jobs. */
    bounds: z.array(hexRow).min(1),
    done: z.array(splitPartSchema.nullable()),
    createdAt: z.number(),
  })
  .refine((s) => s.done.length === s.bounds.length + 1, 'one result per sub-job');
export type SplitJob = z.infer<typeof splitJobSchema>;

/** The row range of sub-job `index` of a split job, as a reservation carries it. */
export function splitRange(s: Pick<SplitJob, 'bounds'>, index: number): { start?: string; end?: string } {
  const start = index === 0 ? undefined : s.bounds[index - 1];
  const end = s.bounds[index];
  return { ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }) };
}

/**
 * A job whose compactor died after a checkpoint, requeued with it: the next reservation of exactly these
 * inputs (same kind, same `allFiles`) runs with these settings and codec and goes on from the checkpoint.
 */
export const resumeSchema = reservationSchema
  .pick({
    queueId: true,
    inputs: true,
    kind: true,
    allFiles: true,
    clip: true,
    compression: true,
    blockSize: true,
    settings: true,
  })
  .extend({
    checkpoint: checkpointSchema,
    /** The reservation it was cancelled from. */
    fromEcid: z.string(),
  });
export type Resume = z.infer<typeof resumeSchema>;

/**
 * Every object a tablet's checkpoints and split jobs name beside its files and reservations: parts the
 * collector must keep, and the outputs of sub-jobs that wait for the rest of their split.
 */
export function checkpointParts(
  meta: Pick<TabletMeta, 'reservations' | 'resumes' | 'splits' | 'holds'>,
): string[] {
  const out: string[] = [];
  // A held output: installed here once its reservation commits, however long it is referenced elsewhere.
  for (const h of meta.holds.values()) out.push(h.output);
  for (const r of meta.reservations.values()) for (const p of r.checkpoint?.parts ?? []) out.push(p.name);
  for (const r of meta.resumes.values()) for (const p of r.checkpoint.parts) out.push(p.name);
  for (const s of meta.splits.values()) for (const d of s.done) if (d?.output) out.push(d.output);
  return out;
}

/**
 * What time it is for a tablet: the clock, never behind the tablet's `time`. Timestamps given to ingested
 * entries, and the `nowMs` of scans and compactions (age-off), read it, so that neither goes backwards
 * when the tablet moves to a server whose clock is behind, or the clock steps back: a batch ingested
 * after another is stamped after it (tserver/hosted-tablet.ts, nextTimestamp), and a scan after a
 * compaction ages nothing off that the compaction kept.
 */
export function tabletTime(meta: Pick<TabletMeta, 'time'>, now = Date.now()): number {
  return Math.max(now, meta.time);
}

export interface TabletMeta {
  row: string;
  tableId: string;
  endRow: EndRow;
  prevEndRow: EndRow;
  loc?: Location;
  future?: Location;
  files: Map<string, FileMeta>;
  reservations: Map<string, Reservation>;
  userCompactions: Map<string, UserCompaction>;
  /** The selection of the user compaction under way, if any. */
  selection?: Selection;
  /** The last user compaction the manager asked of it (`requests`): see the columns above. */
  requests?: string;
  failures: Map<string, Failure>;
  /** Checkpoints kept for requeued jobs, by {@link failureKey} of their inputs. */
  resumes: Map<string, Resume>;
  /** Split jobs under way, by id. */
  splits: Map<string, SplitJob>;
  /** Shares in compactions reserved on a sibling before a split, by their ecid (holds.ts). */
  holds: Map<string, Hold>;
  progress: Map<string, Progress>;
  /** queue id → the ~cq row this tablet has in that queue. */
  queued: Map<string, string>;
  /** Ingest request id → when it was applied and which rows of it, oldest first (ingest-ids.ts). */
  ingests: Map<string, IngestRecord>;
  /** The tablet's clock (`time`; 0: never set): see {@link tabletTime}. */
  time: number;
  /** Changes made by hosting tablet servers so far (0: none). */
  version: number;
}

function json<T>(schema: z.ZodType<T>, text: string, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ExcError('INTERNAL', `malformed metadata: ${what} is not JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new ExcError('INTERNAL', `malformed metadata: ${what}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

const prevSchema = z
  .string()
  .regex(/^(?:[0-9a-f]{2})*$/)
  .nullable();

/** Reads a tablet from its row's cells. */
export function parseTablet(row: string, cols: ReadonlyMap<string, string>): TabletMeta {
  const { tableId, endRow } = parseTabletRow(row);
  const tablet: TabletMeta = {
    row,
    tableId,
    endRow,
    prevEndRow: null,
    files: new Map(),
    reservations: new Map(),
    userCompactions: new Map(),
    failures: new Map(),
    resumes: new Map(),
    splits: new Map(),
    holds: new Map(),
    progress: new Map(),
    queued: new Map(),
    ingests: new Map(),
    time: 0,
    version: 0,
  };
  for (const [col, value] of cols) {
    const what = `${row} ${col}`;
    if (col === COL_PREV) {
      const prev = json(prevSchema, value, what);
      tablet.prevEndRow = prev === null ? null : Buffer.from(prev, 'hex');
    } else if (col === COL_LOC) tablet.loc = json(locationSchema, value, what);
    else if (col === COL_FUTURE) tablet.future = json(locationSchema, value, what);
    else if (col === COL_SELECTED) tablet.selection = json(selectionSchema, value, what);
    else if (col === COL_VERSION) tablet.version = json(z.number().int().nonnegative(), value, what);
    else if (col === COL_TIME) tablet.time = json(z.number().int().nonnegative(), value, what);
    else if (col === COL_REQUESTS) tablet.requests = value;
    else if (col.startsWith(FILE_PREFIX))
      tablet.files.set(col.slice(FILE_PREFIX.length), json(fileMetaSchema, value, what));
    else if (col.startsWith(ECOMP_PREFIX))
      tablet.reservations.set(col.slice(ECOMP_PREFIX.length), json(reservationSchema, value, what));
    else if (col.startsWith(COMPACT_PREFIX))
      tablet.userCompactions.set(col.slice(COMPACT_PREFIX.length), json(userCompactionSchema, value, what));
    else if (col.startsWith(FAILED_PREFIX))
      tablet.failures.set(col.slice(FAILED_PREFIX.length), json(failureSchema, value, what));
    else if (col.startsWith(RESUME_PREFIX))
      tablet.resumes.set(col.slice(RESUME_PREFIX.length), json(resumeSchema, value, what));
    else if (col.startsWith(SPLIT_PREFIX))
      tablet.splits.set(col.slice(SPLIT_PREFIX.length), json(splitJobSchema, value, what));
    else if (col.startsWith(HOLD_PREFIX))
      tablet.holds.set(col.slice(HOLD_PREFIX.length), json(holdSchema, value, what));
    else if (col.startsWith(PROGRESS_PREFIX))
      tablet.progress.set(col.slice(PROGRESS_PREFIX.length), json(progressSchema, value, what));
    else if (col.startsWith(QUEUED_PREFIX)) tablet.queued.set(col.slice(QUEUED_PREFIX.length), value);
    else if (col.startsWith(INGEST_PREFIX))
      tablet.ingests.set(col.slice(INGEST_PREFIX.length), parseIngestRecord(value));
  }
  // Columns come in id order; the tablet server adds ids as they are applied, so keep them by time.
  if (tablet.ingests.size > 1)
    tablet.ingests = new Map([...tablet.ingests].sort((a, b) => a[1].at - b[1].at));
  return tablet;
}

/** The rows a tablet holds, (prevEndRow, endRow], as a {@link HexRange}: what its reads are clipped to. */
export function rowsOf(meta: Pick<TabletMeta, 'prevEndRow' | 'endRow'>): HexRange {
  return tabletRows(meta.prevEndRow, meta.endRow);
}

export function prevValue(prev: EndRow): string {
  return JSON.stringify(prev === null ? null : prev.toString('hex'));
}

export function locationValue(loc: Location): string {
  return JSON.stringify({ server: loc.server, session: loc.session });
}
