/**
 * How the manager's API shows a consistency check (`GET /v1/check`, `excompact admin check`): shared by
 * the manager, which makes it (src/manager/check.ts), and its clients, which print it.
 *
 *   { ok, checkedAt, problems: { <name>: { title, severity, count, items, notCheckable? } }, figures, note }
 *
 * Clients show problems in the order and with the titles the manager sends, so a newer manager's new
 * checks show up in an older CLI.
 */

/** `critical`: data loss; `error`: an invariant is broken; `info`: normal on a busy cluster. */
export type Severity = 'critical' | 'error' | 'info';

export interface ProblemList {
  title: string;
  severity: Severity;
  /** How many were found; null when this could not be checked (see `notCheckable`). */
  count: number | null;
  /** The first 100, in a stable order. */
  items: Record<string, unknown>[];
  /** Why this could not be checked (e.g. the store cannot list incomplete uploads). */
  notCheckable?: string;
}

export interface CheckFigures {
  tablets: number;
  hostedTablets: number;
  reservations: number;
  queueEntries: number;
  deletionMarks: number;
  /** Distinct files the tablets reference (files, reservation inputs and outputs). */
  files: number;
  /** Objects under the tables prefix; null when not listed. */
  objects: number | null;
  objectBytes: number | null;
  temporaries: number | null;
  queues: number;
  liveCompactors: number;
  graceMs: number;
}

export interface CheckReport<Name extends string = string> {
  /** No problem other than the informational ones. */
  ok: boolean;
  /** When the check ran (ms since the epoch). */
  checkedAt: number;
  problems: Record<Name, ProblemList>;
  figures: CheckFigures;
  /** Reading a live cluster is racy: what to make of a problem seen once. */
  note: string;
}
