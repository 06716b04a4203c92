/**
 * How a file's bytes spread over rows, from its profile (split-rows.ts, fileProfile) alone: each data block
 * holds the rows from just after the previous block's last row (the first block: from the file's first
 * row) to its own last row, and its bytes are taken to spread evenly over that span, by the rows' leading
 * bytes read as a number. Pure: the tablet rules estimate a tablet's share of a shared file, and where the
 * middle of a tablet's bytes is, with it.
 *
 * Why not count a block at its last row only: a small file is one block, and all of its bytes would sit at
 * its last row — ten such files holding rows from a to z would put the middle of a tablet at z.
 */
import { compareBytes } from './key.js';
import type { FileProfile } from './split-rows.js';

/** A block of a file as the rows it may hold, [lo, hi], and its bytes. */
export interface RowSpan {
  lo: Buffer;
  hi: Buffer;
  bytes: number;
}

/** Rows (lo, hi]; null is unbounded. The rows of a tablet (its prev end row, its end row). */
export interface RowBounds {
  lo: Buffer | null;
  hi: Buffer | null;
}

/** The spans of a file's blocks, lowest first; none for an empty file. */
export function rowSpans(profile: FileProfile): RowSpan[] {
  if (profile.firstRow === null) return [];
  let lo = profile.firstRow;
  return profile.blocks.map((b) => {
    const span = { lo, hi: b.row, bytes: b.bytes };
    lo = b.row;
    return span;
  });
}

/** Where `row` falls in [lo, hi], 0 to 1, by the bytes after their common prefix read as a number. */
export function fractionAt(lo: Buffer, hi: Buffer, row: Buffer): number {
  if (compareBytes(row, lo) <= 0) return 0;
  if (compareBytes(row, hi) >= 0) return 1;
  // Every row between lo and hi starts with their common prefix.
  let p = 0;
  while (p < lo.length && p < hi.length && lo[p] === hi[p]) p++;
  const num = (b: Buffer) => {
    let x = 0;
    for (let i = 0; i < 6; i++) x = x * 256 + (b[p + i] ?? 0);
    return x;
  };
  const a = num(lo);
  const z = num(hi);
  return z > a ? Math.min(1, Math.max(0, (num(row) - a) / (z - a))) : 0.5;
}

/** The bytes of `span` estimated to be in the rows `bounds`. */
export function bytesWithin(span: RowSpan, bounds: RowBounds): number {
  const from = bounds.lo === null ? 0 : fractionAt(span.lo, span.hi, bounds.lo);
  const to = bounds.hi === null ? 1 : fractionAt(span.lo, span.hi, bounds.hi);
  // A one-row span is wholly in or out.
  if (compareBytes(span.lo, span.hi) === 0) {
    const inside =
      (bounds.lo === null || compareBytes(span.lo, bounds.lo) > 0) &&
      (bounds.hi === null || compareBytes(span.hi, bounds.hi) <= 0);
    return inside ? span.bytes : 0;
  }
  return Math.max(0, to - from) * span.bytes;
}

/** Candidate rows tried for a middle: at most this many, spread over those found. */
const CANDIDATES = 256;
/** A row of the files' indexes this near the middle (a share of the bytes) is taken as it is. */
const NEAR = 0.1;

/**
 * The row nearest the middle of the bytes of `spans` within `bounds`, strictly inside them, such that
 * both sides hold some bytes; undefined when there is none (the bytes are all in one row, say). A row of
 * the files' indexes (a block's last row, a file's first) when one is near; otherwise a row between, as
 * short as keeps it near — a tablet of a few one-block files has index rows only at its ends.
 */
export function middleOf(spans: readonly RowSpan[], bounds: RowBounds): Buffer | undefined {
  const inside = (r: Buffer) =>
    (bounds.lo === null || compareBytes(r, bounds.lo) > 0) &&
    (bounds.hi === null || compareBytes(r, bounds.hi) < 0);
  const total = spans.reduce((n, s) => n + bytesWithin(s, bounds), 0);
  if (total <= 0) return undefined;
  const leftOf = (row: Buffer) => spans.reduce((n, s) => n + bytesWithin(s, { lo: bounds.lo, hi: row }), 0);
  const offOf = (row: Buffer): number => {
    if (!inside(row)) return Infinity;
    const left = leftOf(row);
    return left <= 0 || left >= total ? Infinity : Math.abs(left - total / 2);
  };

  const rows = spans.flatMap((s) => [s.lo, s.hi]).filter(inside);
  rows.sort(compareBytes);
  const unique = rows.filter((r, i) => i === 0 || compareBytes(r, rows[i - 1]!) !== 0);
  const step = Math.max(1, unique.length / CANDIDATES);
  let best: { row: Buffer; off: number } | undefined;
  for (let i = 0; i < unique.length; i += step) {
    const row = unique[Math.floor(i)]!;
    const off = offOf(row);
    if (off < (best?.off ?? Infinity)) best = { row, off };
  }
  if (best && best.off <= NEAR * total) return best.row;

  const between = rowBetween(spans, bounds, total, leftOf);
  if (!between) return best?.row;
  // The shortest start of it that is still near, if any: a readable split row.
  for (let len = 1; len < between.length; len++) {
    const short = between.subarray(0, len);
    if (offOf(short) <= NEAR * total) return Buffer.from(short);
  }
  const off = offOf(between);
  return off < (best?.off ?? Infinity) ? between : best?.row;
}

/** By bisection over the rows' leading bytes: the row with half of `total` before it. */
function rowBetween(
  spans: readonly RowSpan[],
  bounds: RowBounds,
  total: number,
  leftOf: (row: Buffer) => number,
): Buffer | undefined {
  if (spans.length === 0) return undefined;
  const lo = bounds.lo ?? spans.map((s) => s.lo).reduce((a, b) => (compareBytes(a, b) <= 0 ? a : b));
  const hi = bounds.hi ?? spans.map((s) => s.hi).reduce((a, b) => (compareBytes(a, b) >= 0 ? a : b));
  let p = 0;
  while (p < lo.length && p < hi.length && lo[p] === hi[p]) p++;
  const prefix = lo.subarray(0, p);
  const num = (b: Buffer) => {
    let x = 0;
    for (let i = 0; i < 6; i++) x = x * 256 + (b[p + i] ?? 0);
    return x;
  };
  const rowAt = (x: number) => {
    const tail = Buffer.alloc(6);
    tail.writeUIntBE(x, 0, 6);
    let end = 6;
    while (end > 1 && tail[end - 1] === 0) end--;
    return Buffer.concat([prefix, tail.subarray(0, end)]);
  };
  let a = num(lo);
  let z = num(hi);
  while (z - a > 1) {
    const m = Math.floor((a + z) / 2);
    if (leftOf(rowAt(m)) < total / 2) a = m;
    else z = m;
  }
  return rowAt(z);
}
