/**
 * Deletion marks and the garbage collector's claims on them.
 *
 *   ~del:<path>  at    → decimal ms since the epoch: when the file stopped being referenced (written by a
 *                        commit for its inputs, a cancel for its output, a table deletion for its files)
 *                claim → "<epoch>:<cycle>": the collector of manager epoch <epoch>, in its cycle <cycle>,
 *                        is about to delete the file
 *
 * The collector deletes an object only after claiming it: a conditional mutation that finds the mark as
 * it was read (same `at`, same claim or none) and writes the claim. Every write checks the manager's epoch
 * (store.ts), so a claim that applied proves that its manager held the store at that moment; a file
 * found by the sweep (a crash leftover, no mark) is claimed by writing its mark and claim together,
 * conditional on there being no mark yet. Once the object is deleted the row is removed, conditional on
 * the claim still being this cycle's.
 *
 * A claim is final: nothing may reference a file whose mark carries one. Code that wants to use an
 * unreferenced file again (a resumed compaction keeping its partial output, say) must remove the file's
 * mark in the mutation that references it, conditional on the mark having no claim; then either that
 * mutation or the claim fails, never both succeed. A claim left behind by a collector that stopped (a
 * fenced or crashed manager, an aborted cycle) is taken over by the next cycle, of any epoch: the claimed
 * file is unreferenced for good, so deleting it later is always right.
 */
import { DEL_PREFIX, delRow } from '../meta/keys.js';
import { TABLES_PREFIX } from '../meta/paths.js';
import { scanRows, type MetaReader } from '../meta/backend.js';
import { isValidName } from '../storage/names.js';
import type { Condition, Mutation } from '../meta/types.js';

export const COL_AT = 'at';
export const COL_CLAIM = 'claim';

/** A deletion mark as read: `atText` and `claim` exactly as stored, for the conditions of a claim. */
export interface DeletionMark {
  at: number;
  atText: string;
  claim?: string;
}

/** Every deletion mark, by file. A row without `at` (never written so) counts as marked now. */
export async function readMarks(store: MetaReader): Promise<Map<string, DeletionMark>> {
  const marks = new Map<string, DeletionMark>();
  for await (const { row, cols } of scanRows(store, { prefix: DEL_PREFIX })) {
    const atText = cols.get(COL_AT);
    const claim = cols.get(COL_CLAIM);
    marks.set(row.slice(DEL_PREFIX.length), {
      at: atText === undefined ? Date.now() : Number(atText),
      atText: atText ?? '',
      ...(claim === undefined ? {} : { claim }),
    });
  }
  return marks;
}

/**
 * Why a deletion mark cannot be acted on, or null when it can: the file must be a valid object name under
 * `tables/` (the only place tablet files live: a mark naming anything else is not the collector's to
 * delete) and `at`, when present, a time. Such a mark is never written by the project's own processes; a
 * hand-made or corrupted row must not stop the collector (it skips and reports it, see gc.ts).
 */
export function markProblem(file: string, mark: DeletionMark): string | null {
  if (!isValidName(file)) return 'not a valid object name';
  if (!file.startsWith(TABLES_PREFIX)) return `not a tablet file (outside ${TABLES_PREFIX})`;
  if (mark.atText !== '' && !/^\d{1,16}$/.test(mark.atText))
    return `"at" is not a time: ${JSON.stringify(mark.atText.slice(0, 40))}`;
  return null;
}

/** The claim of one collector cycle of one manager epoch. */
export function claimOf(epoch: number, cycle: number): string {
  return `${epoch}:${cycle}`;
}

/**
 * Claims `file` for deletion: applies only if its mark is still `mark`. A file with no mark (found by the
 * sweep) gets one, dated `lastModifiedMs` (when it was last written, so a claim the collector could not
 * finish is finished by the next cycle, not a grace period later), if it still has none.
 */
export function claimMutation(
  file: string,
  mark: DeletionMark | undefined,
  claim: string,
  lastModifiedMs: number,
): Mutation {
  const row = delRow(file);
  if (!mark) {
    return {
      conditions: [{ op: 'absent', row, col: COL_AT }],
      puts: [
        { row, col: COL_AT, value: String(Math.floor(lastModifiedMs)) },
        { row, col: COL_CLAIM, value: claim },
      ],
    };
  }
  const conditions: Condition[] = [
    mark.atText === ''
      ? { op: 'absent', row, col: COL_AT }
      : { op: 'equals', row, col: COL_AT, value: mark.atText },
    mark.claim === undefined
      ? { op: 'absent', row, col: COL_CLAIM }
      : { op: 'equals', row, col: COL_CLAIM, value: mark.claim },
  ];
  return { conditions, puts: [{ row, col: COL_CLAIM, value: claim }] };
}

/** Removes the mark of a deleted file, if it still carries this claim. */
export function dropMutation(file: string, claim: string): Mutation {
  const row = delRow(file);
  return { conditions: [{ op: 'equals', row, col: COL_CLAIM, value: claim }], deleteRows: [row] };
}
