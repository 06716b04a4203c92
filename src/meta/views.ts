/**
 * How the manager's API shows tables and tablets (shared by the manager and its clients).
 */
import { ExcError } from '../errors.js';
import { hex } from './keys.js';
import type { Outcome } from './outcomes.js';
import type { TableConfig } from './table-config.js';
import type { TabletMeta } from './tablet.js';

/** `offline`: taken offline by an admin (hosted nowhere, nothing queued) until brought back online. */
export type TableState = 'online' | 'offline' | 'deleting';

export interface TableInfo {
  id: string;
  name: string;
  state: TableState;
  config: TableConfig;
  createdAt: number;
  /** When it was last brought back online (ms): reservations older than that were cut off by it. */
  onlineAt?: number;
}

/** What reading, writing or reshaping an offline table answers. */
export function tableOfflineError(name: string): ExcError {
  return new ExcError(
    'TABLE_OFFLINE',
    `table ${name} is offline: bring it back with \`excompact admin table online ${name}\``,
    { details: { table: name, state: 'offline' } },
  );
}

/** A tablet as the API shows it: rows in hex (and as text when printable), maps as arrays. */
export function describeTablet(t: TabletMeta) {
  return {
    tablet: t.row,
    tableId: t.tableId,
    endRowHex: t.endRow === null ? null : hex(t.endRow),
    prevEndRowHex: t.prevEndRow === null ? null : hex(t.prevEndRow),
    loc: t.loc ?? null,
    future: t.future ?? null,
    files: [...t.files].map(([name, meta]) => ({ name, ...meta })),
    reservations: [...t.reservations].map(([ecid, r]) => ({ ecid, ...r })),
    userCompactions: [...t.userCompactions].map(([id, c]) => ({ id, ...c })),
    failures: [...t.failures].map(([key, f]) => ({ key, ...f })),
  };
}
export type TabletView = ReturnType<typeof describeTablet>;

/** A running compaction (a reservation), as operators see it. */
export interface RunningCompaction {
  ecid: string;
  tablet: string;
  table: string;
  queueId: string;
  queue: string | null;
  compactor: string;
  kind: 'system' | 'user';
  attempt: number;
  inputs: number;
  /** Total size of the inputs (the progress bar's 100 %); a sub-job's share of them. */
  inputBytes: number;
  /** A sub-job of a split job: its split, its place there (0-based) and how many there are. */
  split?: { id: string; index: number; of: number };
  /** Bytes of its output durable at the last checkpoint recorded (a compactor that dies now loses the rest). */
  checkpointBytes?: number;
  reservedAt: number;
  ageMs: number;
  progress: {
    entriesRead: number;
    entriesWritten: number;
    bytesRead: number;
    bytesWritten: number;
    at: number;
  } | null;
  server: string | null;
}

/** A parked job (failed too often), as operators see it. */
export interface ParkedCompaction {
  id: string;
  tablet: string;
  table: string;
  queueId: string | null;
  queue: string | null;
  attempts: number;
  lastError: string;
  lastEcid: string | null;
  inputs: string[];
  at: number;
  /** The user compactions whose job it is (empty: a system job). Only these can be cancelled. */
  userCompactionIds: string[];
}

/** A live compactor, from its ZooKeeper node. */
export interface CompactorView {
  queue: string;
  queueId: string;
  path: string;
  host: string | null;
  pid: number | null;
  version: string | null;
  started: number | null;
  status: string | null;
}

/**
 * A compactor's name for people: `<queue>@<host>#<n>`, `n` the sequence number ZooKeeper gave its node
 * (unique within the queue), instead of the node's protected name `_c_<uuid>-c-<seq>`. Listings show this;
 * `--json` and the API keep the full path, which is the compactor's identity.
 */
export function shortCompactorName(path: string, queue?: string | null, host?: string | null): string {
  const node = path.slice(path.lastIndexOf('/') + 1);
  const seq = /-c-(\d+)$/.exec(node)?.[1];
  const id = seq === undefined ? node.slice(-8) : String(Number(seq));
  return `${queue ?? ''}${host ? `@${host}` : ''}#${id}`;
}

/**
 * What `POST /v1/compactions/:id/cancel` answers: a running compaction cancelled, or how it had ended
 * (`cancelled: false`, not an error); a user compaction, with the tablets where it was cancelled now; a
 * parked user job, with the user compactions it was the job of.
 */
export type CancelAnswer =
  | { cancelled: true }
  | { cancelled: false; ended: Pick<Outcome, 'outcome' | 'reason' | 'error' | 'at'> }
  | { cancelled: boolean; userCompaction: { id: string; table: string; tablets: string[] } }
  | { cancelled: true; parked: { id: string; tablet: string; userCompactionIds: string[] } };
