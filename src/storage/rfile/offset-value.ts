/**
 * Offset-value codes (Graefe's OVC) over BlockEntry fields: how the merge (iterators/merge-blocks.ts)
 * decides most comparisons with one integer compare instead of reading the entries' bytes.
 *
 * An entry is read as a sequence of symbols (0-256) whose lexicographic order is compareBlockEntries:
 *
 *   row bytes + 1, 0 | family bytes + 1, 0 | qualifier bytes + 1, 0 | 255 − each byte of the u64
 *   timestamp (newest first) | 0 for a delete marker, 1 for a put | value bytes + 1, 0
 *
 * (a terminating 0 makes a field that is a prefix of another sort first, as compareBytes says).
 *
 * The code of an entry `b` relative to an entry `a` ≤ b is 0 when they are equal, else made from the
 * offset of the first symbol where they differ, b's symbol there and b's next symbol (0 past its end):
 * `(CAP − offset) × 2^18 + symbol × 2^9 + next`. Among entries ≥ a, a smaller code is a smaller entry
 * (it differs from a later, or at the same place with smaller symbols); equal codes say only that both
 * agree with a up to and including those two symbols. Offsets of {@link OVC_CAP} or more (keys of over
 * 4 KB alike) all get {@link OVC_FAR}: such entries are compared from there. Codes stay below 2^30, so
 * V8 keeps them as small integers.
 *
 * The second symbol is what keeps matches off the bytes on keys that count up: the heads of a merge
 * after `row…1234` are mostly `row…124x`, which all first differ from it at the tens digit; with the
 * first symbol alone every match between them was a tie settled on the bytes (about one per entry).
 * When two codes share offset and first symbol, the loser's code relative to the winner starts one
 * symbol later, and {@link nextCode} makes it from the old code and one symbol read from the entry.
 */

/**
 * The fields of a BlockEntry (block-entry.ts) that codes are made from: declared here, not imported, as
 * block-entry.ts imports this module (its decoder makes each entry's code).
 */
export interface EncodedEntry {
  readonly block: Buffer;
  readonly view: DataView;
  readonly rowStart: number;
  readonly familyStart: number;
  readonly qualifierStart: number;
  readonly valueStart: number;
  readonly end: number;
  readonly deleted: boolean;
}

/** Offsets from here on share one code. */
export const OVC_CAP = 4095;
/** The code of an entry equal to its base. */
export const OVC_EQUAL = 0;
/** The code of an entry that differs from its base at offset {@link OVC_CAP} or later. */
export const OVC_FAR = 1;
/** Above every code: what the merge gives an exhausted source. */
export const OVC_NONE = 2 ** 30 - 1;
/** Codes from here on carry an offset (below: OVC_EQUAL and OVC_FAR). */
export const OVC_MIN_OFFSET_CODE = 2 ** 18;

function code(offset: number, symbol: number, next: number): number {
  return offset >= OVC_CAP ? OVC_FAR : (OVC_CAP - offset) * 262_144 + symbol * 512 + next;
}

/** The offset of a code of {@link OVC_MIN_OFFSET_CODE} or more: where its entry differs from its base. */
export function ovcOffset(ovc: number): number {
  return OVC_CAP - (ovc >> 18);
}

/**
 * The code of `e` relative to an entry `w` that beat it, where e's code `ovc` (relative to an earlier
 * base) has the offset and first symbol of w's: e and w first differ at the next symbol, which is e's
 * second symbol in `ovc`; the symbol after it is read from e.
 */
export function nextCode(e: EncodedEntry, ovc: number): number {
  const offset = ovcOffset(ovc) + 1;
  return code(offset, ovc & 511, symbolAt(e, offset + 1));
}

/** The symbol at offset `p` of an entry (see the module comment); 0 past its end. */
export function symbolAt(e: EncodedEntry, p: number): number {
  const b = e.block;
  let len = e.familyStart - e.rowStart;
  if (p <= len) return p < len ? b[e.rowStart + p]! + 1 : 0;
  p -= len + 1;
  len = e.qualifierStart - e.familyStart;
  if (p <= len) return p < len ? b[e.familyStart + p]! + 1 : 0;
  p -= len + 1;
  len = e.valueStart - e.qualifierStart;
  if (p <= len) return p < len ? b[e.qualifierStart + p]! + 1 : 0;
  p -= len + 1;
  if (p < 8) return 255 - b[e.rowStart - 8 + p]!;
  if (p === 8) return e.deleted ? 0 : 1;
  p -= 9;
  return p < e.end - e.valueStart ? b[e.valueStart + p]! + 1 : 0;
}

/**
 * A difference at `offset` between symbols x (of a) and y (of b): compareFrom's result, the code of
 * the greater relative to the smaller, negated when a is the smaller.
 */
function result(a: EncodedEntry, b: EncodedEntry, offset: number, x: number, y: number): number {
  if (offset >= OVC_CAP) return x < y ? -OVC_FAR : OVC_FAR;
  return x < y ? -code(offset, y, symbolAt(b, offset + 1)) : code(offset, x, symbolAt(a, offset + 1));
}

/** Where fieldDiff found a difference: the symbols there (second return values without allocating). */
let symA = 0;
let symB = 0;

/**
 * The first symbol from `skip` on where two byte fields (each with its terminator) differ, as an index
 * into the field, with the symbols there in symA and symB; -1 when the fields are equal.
 */
function fieldDiff(
  av: DataView,
  as: number,
  ae: number,
  bv: DataView,
  bs: number,
  be: number,
  skip: number,
): number {
  const la = ae - as;
  const lb = be - bs;
  const n = la < lb ? la : lb;
  let i = skip;
  // getUint32 is big-endian, so the first differing byte of two words is the highest differing one.
  for (; i + 4 <= n; i += 4) {
    const x = av.getUint32(as + i);
    const y = bv.getUint32(bs + i);
    if (x !== y) {
      const j = Math.clz32(x ^ y) >> 3;
      symA = ((x >>> (24 - 8 * j)) & 0xff) + 1;
      symB = ((y >>> (24 - 8 * j)) & 0xff) + 1;
      return i + j;
    }
  }
  for (; i < n; i++) {
    const x = av.getUint8(as + i);
    const y = bv.getUint8(bs + i);
    if (x !== y) {
      symA = x + 1;
      symB = y + 1;
      return i;
    }
  }
  if (la === lb) return -1;
  // One is a prefix of the other: its terminator (0) meets the other's next byte.
  symA = la === n ? 0 : av.getUint8(as + n) + 1;
  symB = lb === n ? 0 : bv.getUint8(bs + n) + 1;
  return n;
}

/**
 * Compares two entries that agree on every symbol before offset `from` (0 when nothing is known): 0 when
 * they are equal; otherwise the offset-value code of the greater relative to the smaller, negated when
 * `a` is the smaller. So the sign is compareBlockEntries(a, b)'s, and the magnitude is what the loser of
 * a match in the merge keeps as its code relative to the winner.
 */
export function compareFrom(a: EncodedEntry, b: EncodedEntry, from: number): number {
  const av = a.view;
  const bv = b.view;
  // Row, family, qualifier: a field of L bytes covers L + 1 symbols; one that ends before `from` is
  // known to be equal (and so of the same length) and skipped whole.
  let pos = 0;
  let d: number;
  let end = a.familyStart - a.rowStart;
  if (from <= end) {
    d = fieldDiff(av, a.rowStart, a.familyStart, bv, b.rowStart, b.familyStart, from);
    if (d >= 0) return result(a, b, d, symA, symB);
  }
  pos = end + 1;
  end = pos + (a.qualifierStart - a.familyStart);
  if (from <= end) {
    const skip = from > pos ? from - pos : 0;
    d = fieldDiff(av, a.familyStart, a.qualifierStart, bv, b.familyStart, b.qualifierStart, skip);
    if (d >= 0) return result(a, b, pos + d, symA, symB);
  }
  pos = end + 1;
  end = pos + (a.valueStart - a.qualifierStart);
  if (from <= end) {
    const skip = from > pos ? from - pos : 0;
    d = fieldDiff(av, a.qualifierStart, a.valueStart, bv, b.qualifierStart, b.valueStart, skip);
    if (d >= 0) return result(a, b, pos + d, symA, symB);
  }
  pos = end + 1;
  // The timestamp (the 8 bytes right before the row) as two words, a larger byte being a smaller
  // symbol (newest first); then the delete flag.
  if (from < pos + 9) {
    let x = av.getUint32(a.rowStart - 8);
    let y = bv.getUint32(b.rowStart - 8);
    let at = pos;
    if (x === y) {
      x = av.getUint32(a.rowStart - 4);
      y = bv.getUint32(b.rowStart - 4);
      at += 4;
    }
    if (x !== y) {
      const j = Math.clz32(x ^ y) >> 3;
      const sx = 255 - ((x >>> (24 - 8 * j)) & 0xff);
      const sy = 255 - ((y >>> (24 - 8 * j)) & 0xff);
      return result(a, b, at + j, sx, sy);
    }
    if (a.deleted !== b.deleted) return result(a, b, pos + 8, a.deleted ? 0 : 1, b.deleted ? 0 : 1);
  }
  pos += 9;
  const skip = from > pos ? from - pos : 0;
  d = fieldDiff(av, a.valueStart, a.end, bv, b.valueStart, b.end, skip);
  return d >= 0 ? result(a, b, pos + d, symA, symB) : 0;
}

/**
 * Whether an entry whose code relative to the entry before it is `ovc` has that entry's cell (row,
 * family, qualifier): they first differ after the qualifier. Undefined when the code does not tell.
 */
export function sameCellByCode(e: EncodedEntry, ovc: number): boolean | undefined {
  if (ovc === OVC_EQUAL) return true;
  if (ovc === OVC_FAR) return undefined;
  return ovcOffset(ovc) >= e.valueStart - e.rowStart + 3;
}
