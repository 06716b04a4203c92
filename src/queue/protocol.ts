/**
 * The reservation protocol's messages between compactors and tablet servers (DESIGN.md, "The life of a
 * compaction"): what a compactor sends to reserve and commit, and what a reservation gives it.
 */
import type { Reservation } from '../meta/tablet.js';
import type { FileFigures } from '../meta/file-stats.js';

export interface ReserveRequest {
  tablet: string;
  queueId: string;
  compactor: string;
  /** Names this attempt: repeating a reserve with the same id returns the reservation it made. */
  requestId?: string;
}

export interface ReservedJob {
  ecid: string;
  tablet: string;
  tableId: string;
  queueId: string;
  kind: 'system' | 'user';
  attempt: number;
  /** With its fence: the rows of it the job reads (meta/tablet.ts, FileMeta.fence). */
  inputs: { name: string; size: number; entries: number; fence?: { start?: string; end?: string }[] }[];
  output: string;
  /** Iterator settings for the compaction (versions, ttl, filters, reference time, dropDeletes). */
  settings: Reservation['settings'];
  /** Block codec of the output (the table's); absent from a tablet server that predates it: the default. */
  compression?: Reservation['compression'];
  /** Data block size of the output (the table's); absent: the default. */
  blockSize?: number;
  /** Partial compaction: delete markers must be kept. */
  keepDeletes: boolean;
  /** A sub-job of a split job: compact only the rows in [start, end) (hex; absent: unbounded). */
  range?: { start?: string; end?: string };
  /**
   * The rows the job was reserved for, [start, end) (hex; meta/rows.ts): its inputs may hold others (files
   * a tablet shares with its sibling after a split), which it must not read. Absent: every row.
   */
  clip?: { start?: string; end?: string };
  /** Go on from this checkpoint of an earlier attempt (DESIGN.md, "Resume"). */
  checkpoint?: { parts: { name: string; size: number }[]; bytes: number; state: string };
}

export interface CommitRequest {
  tablet: string;
  ecid: string;
  compactor: string;
  /** The output as written (with its statistics), or null when nothing survived the iterators (no file). */
  output: FileFigures | null;
}
