/** What the tablet rules (rules.ts, reserve-rules.ts, progress-rules.ts) decide: a change to one tablet. */
import { ecompCol, fileCol, type TabletMeta } from '../meta/tablet.js';
import type { Cell, Condition } from '../meta/types.js';

/** A change to one tablet: the mutation's parts and what it does to the in-memory copy once applied. */
export interface RuleChange {
  conditions: Condition[];
  puts: Cell[];
  deletes: { row: string; col: string }[];
  apply: (meta: TabletMeta) => void;
}

/**
 * The condition that a reservation still exists. Its column is written under a fresh ULID, rewritten only
 * to record a checkpoint (which changes nothing a commit or cancel decides on), and then deleted, so being
 * there is enough (comparing values would tie every stored reservation to how today's schema
 * re-serialises it).
 */
export const reservationExists = (row: string, ecid: string): Condition => ({
  op: 'present',
  row,
  col: ecompCol(ecid),
});

export const filesPresent = (row: string, files: readonly string[]): Condition[] =>
  files.map((f) => ({ op: 'present' as const, row, col: fileCol(f) }));
