/**
 * Offset-value codes (Graefe's OVC) over BlockEntry fields: how the merge (iterators/merge-blocks.ts)
 * decides most comparisons with one integer compare instead of reading the entries' bytes.
 *
 * An entry is read as a sequence of symbols whose lexicographic order is compareBlockEntries. Each byte
 * field (row, family, qualifier, then value) is cut into 2-byte chunks, the last one short or empty: a
 * field of L bytes gives ⌊L/2⌋ + 1 symbols, each `v × 3 + r` where r (0-2) is the chunk's real bytes
 * and v their big-endian value padded with zeros, so a field that is a prefix of another sorts first,
 * as compareBytes says. Between the qualifier and the value, the timestamp's four 2-byte chunks v
 * give `0xffff − v` (newest first) and the delete flag one symbol (0 for a marker, 1 for a put).
 *
 * The code of an entry `b` relative to an entry `a` ≤ b is 0 when they are equal, else made from the
 * offset of the first symbol where they differ and b's symbol there: `(CAP − offset) × 2^18 + symbol`.
 * Among entries ≥ a, a smaller code is a smaller entry (it differs from a later, or at the same place
 * with a smaller symbol); equal codes say only that both agree with a up to and including that symbol.
 * Offsets of {@link OVC_CAP} or more (keys over 8 KB alike) all get {@link OVC_FAR}: such entries are
 * compared from there. Codes stay below 2^30, so V8 keeps them as small integers.
 *
 * Two-byte symbols rather than bytes: on keys that count up (`row0000001234`), the entries a merge
 * compares usually differ from the last one written in different chunks, or in different values of the
 * same chunk; with one-byte symbols about one match per entry was a tie to settle on the bytes.
 */
import type { BlockEntry } from './block-entry.js';

/** Offsets from here on share one code. */
export const OVC_CAP = 4095;
/** The code of an entry equal to its base. */
export const OVC_EQUAL = 0;
/** The code of an entry that differs from its base at offset {@link OVC_CAP} or later. */
export const OVC_FAR = 1;
/** Above every code: what the merge gives an exhausted source. */
export const OVC_NONE = 2 ** 30 - 1;

const SYMBOL_BITS = 2 ** 18;

/** The offset of a code above {@link OVC_FAR}: the first symbol where its entry differs from its base. */
export function ovcOffset(ovc: number): number {
  return OVC_CAP - (ovc >> 18);
}

/** The symbol of the chunk at byte `at` of a field [s, e) of a block (see the module comment). */
function chunk(view: DataView, s: number, e: number, at: number): number {
  const r = e - s - at;
  if (r >= 2) return view.getUint16(s + at) * 3 + 2;
  if (r === 1) return view.getUint8(s + at) * 768 + 1;
  return 0;
}

/** A difference at `offset` between symbols x (of a) and y (of b): the result of compareFrom. */
function result(offset: number, x: number, y: number): number {
  if (offset >= OVC_CAP) return x < y ? -OVC_FAR : OVC_FAR;
  const base = (OVC_CAP - offset) * SYMBOL_BITS;
  return x < y ? -(base + y) : base + x;
}

/**
 * Compares two byte fields, a's at [as, ae) and b's at [bs, be), whose first `skip` symbols agree and
 * whose first symbol is at offset `pos`: compareFrom's result for the first symbol from `skip` on where
 * they differ, or 0 when the fields are equal.
 */
function fieldDiff(
  av: DataView,
  as: number,
  ae: number,
  bv: DataView,
  bs: number,
  be: number,
  skip: number,
  pos: number,
): number {
  const la = ae - as;
  const lb = be - bs;
  const n = la < lb ? la : lb;
  let i = 2 * skip;
  let d = -1;
  // getUint32 is big-endian, so the first differing byte of two words is the highest differing one.
  for (; i + 4 <= n; i += 4) {
    const x = av.getUint32(as + i);
    const y = bv.getUint32(bs + i);
    if (x !== y) {
      d = i + (Math.clz32(x ^ y) >> 3);
      break;
    }
  }
  if (d < 0) {
    for (; i < n; i++) {
      if (av.getUint8(as + i) !== bv.getUint8(bs + i)) {
        d = i;
        break;
      }
    }
    if (d < 0) {
      if (la === lb) return 0;
      d = n;
    }
  }
  const at = d & ~1;
  return result(pos + (at >> 1), chunk(av, as, ae, at), chunk(bv, bs, be, at));
}

/**
 * Compares two entries that agree on every symbol before offset `from` (0 when nothing is known): 0 when
 * they are equal; otherwise the offset-value code of the greater relative to the smaller, negated when
 * `a` is the smaller. So the sign is compareBlockEntries(a, b)'s, and the magnitude is what the loser of
 * a match in the merge keeps as its code relative to the winner.
 */
export function compareFrom(a: BlockEntry, b: BlockEntry, from: number): number {
  const av = a.view;
  const bv = b.view;
  // Row, family, qualifier: a field of L bytes covers ⌊L/2⌋ + 1 symbols; one that ends before `from` is
  // known to be equal (and so of the same length) and skipped whole.
  let pos = 0;
  let c: number;
  let end = (a.familyStart - a.rowStart) >> 1;
  if (from <= end) {
    c = fieldDiff(av, a.rowStart, a.familyStart, bv, b.rowStart, b.familyStart, from, 0);
    if (c !== 0) return c;
  }
  pos = end + 1;
  end = pos + ((a.qualifierStart - a.familyStart) >> 1);
  if (from <= end) {
    const skip = from > pos ? from - pos : 0;
    c = fieldDiff(av, a.familyStart, a.qualifierStart, bv, b.familyStart, b.qualifierStart, skip, pos);
    if (c !== 0) return c;
  }
  pos = end + 1;
  end = pos + ((a.valueStart - a.qualifierStart) >> 1);
  if (from <= end) {
    const skip = from > pos ? from - pos : 0;
    c = fieldDiff(av, a.qualifierStart, a.valueStart, bv, b.qualifierStart, b.valueStart, skip, pos);
    if (c !== 0) return c;
  }
  pos = end + 1;
  // The timestamp (the 8 bytes right before the row) as two words, a larger chunk being a smaller
  // symbol (newest first); then the delete flag.
  if (from < pos + 5) {
    let x = av.getUint32(a.rowStart - 8);
    let y = bv.getUint32(b.rowStart - 8);
    let at = pos;
    if (x === y) {
      x = av.getUint32(a.rowStart - 4);
      y = bv.getUint32(b.rowStart - 4);
      at += 2;
    }
    if (x !== y) {
      if (x >>> 16 !== y >>> 16) return result(at, 0xffff - (x >>> 16), 0xffff - (y >>> 16));
      return result(at + 1, 0xffff - (x & 0xffff), 0xffff - (y & 0xffff));
    }
    if (a.deleted !== b.deleted) return result(pos + 4, a.deleted ? 0 : 1, b.deleted ? 0 : 1);
  }
  pos += 5;
  const skip = from > pos ? from - pos : 0;
  return fieldDiff(av, a.valueStart, a.end, bv, b.valueStart, b.end, skip, pos);
}

/**
 * Whether an entry whose code relative to the entry before it is `ovc` has that entry's cell (row,
 * family, qualifier): they first differ after the qualifier. Undefined when the code does not tell.
 */
export function sameCellByCode(e: BlockEntry, ovc: number): boolean | undefined {
  if (ovc === OVC_EQUAL) return true;
  if (ovc === OVC_FAR) return undefined;
  const cellSymbols =
    ((e.familyStart - e.rowStart) >> 1) +
    ((e.qualifierStart - e.familyStart) >> 1) +
    ((e.valueStart - e.qualifierStart) >> 1) +
    3;
  return ovcOffset(ovc) >= cellSymbols;
}
