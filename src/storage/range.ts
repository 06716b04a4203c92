import { compareBytes } from './key.js';

/**
 * A range of rows. Both ends are optional (unbounded). Defaults: the start is inclusive, the end
 * exclusive. A tablet holds the rows in (prevEndRow, endRow], so a tablet server scans with
 * `{ startRow: prevEndRow, startInclusive: false, endRow, endInclusive: true }`.
 */
export interface RowRange {
  startRow?: Buffer;
  /** Default true. */
  startInclusive?: boolean;
  endRow?: Buffer;
  /** Default false. */
  endInclusive?: boolean;
}

/** Whether `row` is at or after the start of `range`. */
export function rowAfterStart(row: Uint8Array, range: RowRange): boolean {
  if (range.startRow === undefined) return true;
  const c = compareBytes(row, range.startRow);
  return c > 0 || (c === 0 && range.startInclusive !== false);
}

/** Whether `row` is at or before the end of `range`. */
export function rowBeforeEnd(row: Uint8Array, range: RowRange): boolean {
  if (range.endRow === undefined) return true;
  const c = compareBytes(row, range.endRow);
  return c < 0 || (c === 0 && range.endInclusive === true);
}

export function rowInRange(row: Uint8Array, range: RowRange): boolean {
  return rowAfterStart(row, range) && rowBeforeEnd(row, range);
}

/** Whether no row can be in `range` (its end is before its start). */
export function rangeIsEmpty(range: RowRange): boolean {
  if (range.startRow === undefined || range.endRow === undefined) return false;
  const c = compareBytes(range.startRow, range.endRow);
  if (c > 0) return true;
  return c === 0 && !(range.startInclusive !== false && range.endInclusive === true);
}
