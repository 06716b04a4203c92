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

/**
 * Whether no row can be in `range`: its end is before its start, or it ends before the empty row (the
 * smallest row there is) without including it.
 */
export function rangeIsEmpty(range: RowRange): boolean {
  if (range.endRow !== undefined && range.endRow.length === 0 && range.endInclusive !== true) return true;
  if (range.startRow === undefined || range.endRow === undefined) return false;
  const c = compareBytes(range.startRow, range.endRow);
  if (c > 0) return true;
  return c === 0 && !(range.startInclusive !== false && range.endInclusive === true);
}

/** The rows in both `a` and `b`: the later start and the earlier end (it may be empty, see {@link rangeIsEmpty}). */
export function intersectRanges(a: RowRange, b: RowRange): RowRange {
  const start = laterStart(a, b);
  const end = earlierEnd(a, b);
  return {
    ...(start.startRow === undefined
      ? {}
      : { startRow: start.startRow, startInclusive: start.startInclusive !== false }),
    ...(end.endRow === undefined ? {} : { endRow: end.endRow, endInclusive: end.endInclusive === true }),
  };
}

/** Of two starts, the one that admits fewer rows (at the same row, the exclusive one). */
function laterStart(a: RowRange, b: RowRange): RowRange {
  if (a.startRow === undefined) return b;
  if (b.startRow === undefined) return a;
  const c = compareBytes(a.startRow, b.startRow);
  if (c !== 0) return c > 0 ? a : b;
  return a.startInclusive === false ? a : b;
}

/** Of two ends, the one that admits fewer rows (at the same row, the exclusive one). */
function earlierEnd(a: RowRange, b: RowRange): RowRange {
  if (a.endRow === undefined) return b;
  if (b.endRow === undefined) return a;
  const c = compareBytes(a.endRow, b.endRow);
  if (c !== 0) return c < 0 ? a : b;
  return a.endInclusive === true ? b : a;
}
