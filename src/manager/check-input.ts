/**
 * What the consistency check (check.ts) judges: one snapshot of a live cluster, as check-read.ts reads it.
 */
import type { TableConfig } from '../meta/table-config.js';
import type { TabletMeta } from '../meta/tablet.js';
import type { QueueInfo } from '../queue/registry.js';
import type { TemporaryInfo } from '../storage/object-store.js';

/** What could not be read, and why (the store cannot list temporaries, no store is configured). */
export interface NotCheckable {
  notCheckable: string;
}

export interface CheckInput {
  now: number;
  graceMs: number;
  /**
   * How long past its grace an unreferenced file without a `~del` row may wait for the collector's next
   * sweep (the sweep interval plus a cycle): an orphan only after that (default 0).
   */
  sweepSlackMs?: number;
  /** Tablets, queue entries, deletion marks and table settings: one consistent read. */
  tablets: readonly TabletMeta[];
  /** `~cq` row keys. */
  queueEntries: readonly string[];
  /** `~del` rows: file → when it was marked. */
  deletions: ReadonlyMap<string, number>;
  /** `~del` rows the collector cannot act on: file → why (see deletions.ts, markProblem). */
  badMarks?: ReadonlyMap<string, string>;
  /** Table id → settings. */
  tableConfigs: ReadonlyMap<string, TableConfig>;
  /** Rows that did not parse: row → why. */
  malformed?: ReadonlyMap<string, string>;
  queues: readonly QueueInfo[];
  /** Paths of the compactor nodes that exist. */
  liveCompactors: ReadonlySet<string>;
  /** Objects under the tables prefix: name → size and last modified. */
  objects: ReadonlyMap<string, { size: number; modifiedMs: number }> | NotCheckable;
  temporaries: readonly TemporaryInfo[] | NotCheckable;
}

/** A problem's items, or why they could not be found. */
export type Items = Record<string, unknown>[] | NotCheckable;

export function isNotCheckable(value: unknown): value is NotCheckable {
  return typeof value === 'object' && value !== null && 'notCheckable' in value;
}
