/**
 * Row ranges as the metadata rows carry them (DESIGN.md, "Tablet splits and merges").
 *
 * A tablet holds the rows in (prevEndRow, endRow]. A file it references may hold rows outside that range
 * (a file shared with its sibling after a split): every read of the tablet is clipped to it, and so is
 * every compaction reserved on it. Reservations, split jobs and kept checkpoints record the rows they
 * were reserved for — the tablet's range then — as a {@link HexRange}, so that what they write covers
 * exactly those rows whatever the tablet becomes meanwhile.
 *
 *   HexRange  { start?, end? }   lower-case hex rows, [start, end): start inclusive, end exclusive;
 *                                an absent end is unbounded
 *
 * (prev, end] is [prev 00, end 00): the smallest row after `prev` is `prev` with a zero byte appended,
 * and likewise after `end`. A range never cuts a row, so every cell, with its versions and delete
 * markers, is decided wholly inside or wholly outside it.
 */
import { z } from 'zod';
import type { RowRange } from '../storage/range.js';
import type { EndRow } from './keys.js';

const hexRow = z.string().regex(/^(?:[0-9a-f]{2})*$/);

export const hexRangeSchema = z.object({ start: hexRow.optional(), end: hexRow.optional() });
export type HexRange = z.infer<typeof hexRangeSchema>;

/** Every row. */
export const ALL_ROWS: HexRange = {};

/** The rows of a tablet (prevEndRow, endRow] as a {@link HexRange}. */
export function tabletRows(prevEndRow: EndRow, endRow: EndRow): HexRange {
  return {
    ...(prevEndRow === null ? {} : { start: `${prevEndRow.toString('hex')}00` }),
    ...(endRow === null ? {} : { end: `${endRow.toString('hex')}00` }),
  };
}

// Buffer.compare, not the storage layer's: the CLI reads tablets (meta/tablet.ts imports this) and must
// not load the storage stack for it (test/cli/lazy-load.test.ts).
const compareBytes = (a: Uint8Array, b: Uint8Array): number => Buffer.compare(a, b);
const bytes = (h: string): Buffer => Buffer.from(h, 'hex');
const cmpStart = (a: string | undefined, b: string | undefined): number =>
  a === undefined ? (b === undefined ? 0 : -1) : b === undefined ? 1 : compareBytes(bytes(a), bytes(b));
const cmpEnd = (a: string | undefined, b: string | undefined): number =>
  a === undefined ? (b === undefined ? 0 : 1) : b === undefined ? -1 : compareBytes(bytes(a), bytes(b));

/** The rows in both (possibly empty: {@link isEmptyRange}). */
export function intersectRows(a: HexRange, b: HexRange): HexRange {
  const start = cmpStart(a.start, b.start) >= 0 ? a.start : b.start;
  const end = cmpEnd(a.end, b.end) <= 0 ? a.end : b.end;
  return { ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }) };
}

/** Whether no row is in `r`. */
export function isEmptyRange(r: HexRange): boolean {
  return r.start !== undefined && r.end !== undefined && compareBytes(bytes(r.start), bytes(r.end)) >= 0;
}

/** Whether every row of `inner` is in `outer` (an empty `inner` is in everything). */
export function coversRows(outer: HexRange, inner: HexRange): boolean {
  if (isEmptyRange(inner)) return true;
  return cmpStart(outer.start, inner.start) <= 0 && cmpEnd(outer.end, inner.end) >= 0;
}

export function sameRows(a: HexRange, b: HexRange): boolean {
  return cmpStart(a.start, b.start) === 0 && cmpEnd(a.end, b.end) === 0;
}

/**
 * The rows of `r` in none of `holes`, as ascending disjoint ranges (none left: empty). A tablet that
 * applied some rows of an import (a merge joined it with one that had) reads the import's file in the rest.
 */
export function rowsOutside(r: HexRange, holes: readonly HexRange[]): HexRange[] {
  const sorted = holes.filter((h) => !isEmptyRange(h)).sort((a, b) => cmpStart(a.start, b.start));
  const out: HexRange[] = [];
  let rest: HexRange | null = r;
  for (const h of sorted) {
    if (rest === null || isEmptyRange(rest)) break;
    if (h.start !== undefined) {
      const before = intersectRows(rest, { end: h.start });
      if (!isEmptyRange(before)) out.push(before);
    }
    rest = h.end === undefined ? null : intersectRows(rest, { start: h.end });
  }
  if (rest !== null && !isEmptyRange(rest)) out.push(rest);
  return out;
}

/** Ascending, disjoint ranges: `rows` sorted, and those that touch or overlap joined. */
export function joinRows(rows: readonly HexRange[]): HexRange[] {
  const startOf = (r: HexRange) => (r.start === undefined ? Buffer.alloc(0) : bytes(r.start));
  const sorted = [...rows].sort((a, b) => Buffer.compare(startOf(a), startOf(b)));
  const out: HexRange[] = [];
  for (const r of sorted) {
    const prev = out[out.length - 1];
    // Touching or overlapping: the one before ends where this one starts, or later.
    const touches =
      prev !== undefined && (prev.end === undefined || Buffer.compare(startOf(r), bytes(prev.end)) <= 0);
    if (!touches) {
      out.push({ ...r });
      continue;
    }
    const later =
      prev.end === undefined || r.end === undefined
        ? undefined
        : Buffer.compare(bytes(r.end), bytes(prev.end)) > 0
          ? r.end
          : prev.end;
    out[out.length - 1] = {
      ...(prev.start === undefined ? {} : { start: prev.start }),
      ...(later === undefined ? {} : { end: later }),
    };
  }
  return out;
}

/** Whether `row` is in `r`. */
export function rowInRows(row: Uint8Array, r: HexRange): boolean {
  if (r.start !== undefined && compareBytes(row, bytes(r.start)) < 0) return false;
  return r.end === undefined || compareBytes(row, bytes(r.end)) < 0;
}

/** `r` as the storage layer reads it; undefined for every row (nothing to clip). */
export function toRowRange(r: HexRange): RowRange | undefined {
  if (r.start === undefined && r.end === undefined) return undefined;
  return {
    ...(r.start === undefined ? {} : { startRow: bytes(r.start), startInclusive: true }),
    ...(r.end === undefined ? {} : { endRow: bytes(r.end), endInclusive: false }),
  };
}

/** The rows of `r` for people: `[61, 6200)`, `(-∞, 63)`. */
export function describeRows(r: HexRange): string {
  return `[${r.start ?? '-∞'}, ${r.end ?? '+∞'})`;
}
