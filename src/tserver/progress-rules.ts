/**
 * Progress reports on the tablet (beside rules.ts): which reports show progress (the stall detector's
 * input) and the throttled write of the last figures to the store. Checkpoints, which ride on the same
 * reports, are resume-rules.ts.
 */
import { ecompCol, progressCol, type Progress, type TabletMeta } from '../meta/tablet.js';
import type { RuleChange } from './rule-change.js';

// --- progress ---------------------------------------------------------------------------------------------

export interface ProgressFiguresLike {
  entriesRead: number;
  bytesRead: number;
  entriesWritten: number;
  bytesWritten: number;
  bytesComposed?: number | undefined;
}

/**
 * Whether a progress report shows progress: only figures that moved count, so a compactor that keeps
 * reporting the same numbers is stuck. Written figures count too: a compactor that has read everything
 * may still be writing its output, or composing it from its parts.
 */
export function progressMoved(seen: ProgressFiguresLike | undefined, now: ProgressFiguresLike): boolean {
  return (
    !seen ||
    now.entriesRead > seen.entriesRead ||
    now.bytesRead > seen.bytesRead ||
    now.entriesWritten > seen.entriesWritten ||
    now.bytesWritten > seen.bytesWritten ||
    (now.bytesComposed ?? 0) > (seen.bytesComposed ?? 0)
  );
}

/** Persists a reservation's progress, while it exists. */
export function progressChange(meta: TabletMeta, ecid: string, value: Progress): RuleChange {
  return {
    conditions: [{ op: 'present', row: meta.row, col: ecompCol(ecid) }],
    puts: [{ row: meta.row, col: progressCol(ecid), value: JSON.stringify(value) }],
    deletes: [],
    apply: (m) => m.progress.set(ecid, value),
  };
}
