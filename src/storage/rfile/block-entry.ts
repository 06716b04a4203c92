/**
 * Entries decoded from a data block without copying or slicing: a BlockEntry is the block, a DataView on
 * it, and the offsets of its fields. The merge compares these offsets directly (four bytes at a time
 * through the DataView), the writer copies an entry's encoded bytes in one call, and the Key and value
 * Buffers are only made when someone asks for them. On the benchmark data set this halves the cost of a
 * merge (a Buffer slice costs ~30 ns, more than a whole comparison).
 *
 * {@link compareBlockEntries} is the key order of key.ts (compareKeys, then value bytes) over encoded
 * fields. test/storage/key.test.ts checks that the two agree on random keys. The decoder also gives each
 * entry its offset-value code relative to the entry before it (offset-value.ts), which checks that the
 * block is in order and lets the merge (iterators/merge-blocks.ts) skip most byte comparisons.
 */
import type { Entry, Key } from '../key.js';
import { FormatError } from './codec.js';
import { compareFrom } from './offset-value.js';

export class BlockEntry implements Entry {
  private materialized: Key | undefined;

  constructor(
    /** The decoded (uncompressed) payload of the data block. */
    readonly block: Buffer,
    readonly view: DataView,
    /** First byte of the encoded entry (its flags). */
    readonly start: number,
    readonly rowStart: number,
    readonly familyStart: number,
    readonly qualifierStart: number,
    readonly valueStart: number,
    /** One past the last byte of the value, and of the encoded entry. */
    readonly end: number,
    readonly deleted: boolean,
    /**
     * The offset-value code of this entry relative to the entry right before it in its block
     * (offset-value.ts), for the merge; for a block's first entry, nothing (0). Set by decodeDataBlock.
     */
    public ovc: number,
  ) {}

  /**
   * Read from the block when asked: a field would hold it as a heap number (timestamps are past 2^31),
   * one more allocation per entry decoded (about 10% of a scan's time); comparisons read the encoded
   * words instead.
   */
  get timestamp(): number {
    return this.view.getUint32(this.rowStart - 8) * 0x100000000 + this.view.getUint32(this.rowStart - 4);
  }

  /** The key, as Buffers that are views of the block (made on first use, then kept). */
  get key(): Key {
    return (this.materialized ??= {
      row: this.block.subarray(this.rowStart, this.familyStart),
      family: this.block.subarray(this.familyStart, this.qualifierStart),
      qualifier: this.block.subarray(this.qualifierStart, this.valueStart),
      timestamp: this.timestamp,
      deleted: this.deleted,
    });
  }

  get value(): Buffer {
    return this.block.subarray(this.valueStart, this.end);
  }
}

/** A plain `{ key, value }` object (views of the same bytes): what public APIs hand out. */
export function plainEntry(e: Entry): Entry {
  const k = e.key;
  return {
    key: { row: k.row, family: k.family, qualifier: k.qualifier, timestamp: k.timestamp, deleted: k.deleted },
    value: e.value,
  };
}

/** Unsigned byte order of two ranges, a prefix first; only the sign is meaningful. */
function compareRanges(av: DataView, as: number, ae: number, bv: DataView, bs: number, be: number): number {
  const la = ae - as;
  const lb = be - bs;
  const n = la < lb ? la : lb;
  let i = 0;
  // getUint32 is big-endian by default, so comparing words compares four bytes in order at once.
  for (; i + 4 <= n; i += 4) {
    const x = av.getUint32(as + i);
    const y = bv.getUint32(bs + i);
    if (x !== y) return x < y ? -1 : 1;
  }
  for (; i < n; i++) {
    const x = av.getUint8(as + i);
    const y = bv.getUint8(bs + i);
    if (x !== y) return x < y ? -1 : 1;
  }
  return la - lb;
}

/** compareKeys over encoded fields. */
export function compareBlockKeys(a: BlockEntry, b: BlockEntry): number {
  let c = compareRanges(a.view, a.rowStart, a.familyStart, b.view, b.rowStart, b.familyStart);
  if (c !== 0) return c;
  c = compareRanges(a.view, a.familyStart, a.qualifierStart, b.view, b.familyStart, b.qualifierStart);
  if (c !== 0) return c;
  c = compareRanges(a.view, a.qualifierStart, a.valueStart, b.view, b.qualifierStart, b.valueStart);
  if (c !== 0) return c;
  // The encoded timestamps, a word at a time (newest first).
  let x = a.view.getUint32(a.rowStart - 8);
  let y = b.view.getUint32(b.rowStart - 8);
  if (x === y) {
    x = a.view.getUint32(a.rowStart - 4);
    y = b.view.getUint32(b.rowStart - 4);
  }
  if (x !== y) return x > y ? -1 : 1;
  if (a.deleted !== b.deleted) return a.deleted ? -1 : 1;
  return 0;
}

/** Whether two entries have the same timestamp, from the encoded words. */
export function sameBlockTimestamp(a: BlockEntry, b: BlockEntry): boolean {
  return (
    a.view.getUint32(a.rowStart - 4) === b.view.getUint32(b.rowStart - 4) &&
    a.view.getUint32(a.rowStart - 8) === b.view.getUint32(b.rowStart - 8)
  );
}

/** compareEntries over encoded fields. */
export function compareBlockEntries(a: BlockEntry, b: BlockEntry): number {
  const c = compareBlockKeys(a, b);
  return c !== 0 ? c : compareRanges(a.view, a.valueStart, a.end, b.view, b.valueStart, b.end);
}

/**
 * Whether two byte ranges are equal, compared from their last bytes: neighbouring cells' rows, family
 * and qualifier usually differ near the end (`row0000001233`, `row0000001234`), so a difference is
 * found in the first word instead of the last.
 */
function equalRanges(av: DataView, as: number, ae: number, bv: DataView, bs: number, be: number): boolean {
  const n = ae - as;
  if (n !== be - bs) return false;
  let i = n;
  for (; i >= 4; i -= 4) {
    if (av.getUint32(as + i - 4) !== bv.getUint32(bs + i - 4)) return false;
  }
  for (; i > 0; i--) {
    if (av.getUint8(as + i - 1) !== bv.getUint8(bs + i - 1)) return false;
  }
  return true;
}

/** sameCell over encoded fields (equality only, so from the end: see equalRanges). */
export function sameBlockCell(a: BlockEntry, b: BlockEntry): boolean {
  return (
    equalRanges(a.view, a.rowStart, a.familyStart, b.view, b.rowStart, b.familyStart) &&
    equalRanges(a.view, a.qualifierStart, a.valueStart, b.view, b.qualifierStart, b.valueStart) &&
    equalRanges(a.view, a.familyStart, a.qualifierStart, b.view, b.familyStart, b.qualifierStart)
  );
}

/**
 * Decodes the `count` entries of a data block payload (see the grammar in codec.ts). Every
 * length is bounds-checked; any violation is a FormatError. This is the reader's hot loop: single-byte
 * varints (the common case) are decoded inline.
 */
export function decodeDataBlock(block: Buffer, count: number): BlockEntry[] {
  const out = new Array<BlockEntry>(count);
  // Checked before the array is made: a count no block of this size can hold is damage, not a request.
  if (count > block.length / 13)
    throw new FormatError(`${count} entries cannot fit in ${block.length} bytes`);
  const view = new DataView(block.buffer, block.byteOffset, block.length);
  const end = block.length;
  let p = 0;
  let prev: BlockEntry | null = null;
  for (let i = 0; i < count; i++) {
    const start = p;
    // flags + four one-byte varints + timestamp: the smallest possible entry.
    if (p + 13 > end) throw new FormatError(`entry ${i} at byte ${p} runs past the end of the block`);
    const flags = block[p++]!;
    if (flags > 1) throw new FormatError(`entry ${i}: bad flags 0x${flags.toString(16)}`);
    let rowLen = block[p++]!;
    if (rowLen >= 0x80) {
      rowLen = slowVarint(block, p - 1, end);
      p = varintEnd;
    }
    let familyLen = block[p++]!;
    if (familyLen >= 0x80) {
      familyLen = slowVarint(block, p - 1, end);
      p = varintEnd;
    }
    let qualifierLen = block[p++]!;
    if (qualifierLen >= 0x80) {
      qualifierLen = slowVarint(block, p - 1, end);
      p = varintEnd;
    }
    let valueLen = block[p++]!;
    if (valueLen >= 0x80) {
      valueLen = slowVarint(block, p - 1, end);
      p = varintEnd;
    }
    if (p + 8 > end) throw new FormatError(`entry ${i}: timestamp runs past the end of the block`);
    if (view.getUint32(p) >= 0x200000) throw new FormatError(`entry ${i}: timestamp is 2^53 or more`);
    const rowStart = p + 8;
    const familyStart = rowStart + rowLen;
    const qualifierStart = familyStart + familyLen;
    const valueStart = qualifierStart + qualifierLen;
    p = valueStart + valueLen;
    if (p > end) throw new FormatError(`entry ${i}: fields run past the end of the block`);
    const e = new BlockEntry(
      block,
      view,
      start,
      rowStart,
      familyStart,
      qualifierStart,
      valueStart,
      p,
      flags === 1,
      0,
    );
    if (prev !== null) {
      // The entry's code relative to the one before it (for the merge), which also checks the order.
      const c = compareFrom(prev, e, 0);
      if (c > 0) throw new FormatError(`entry ${i} is out of order`);
      e.ovc = -c;
    }
    out[i] = prev = e;
  }
  if (p !== end) throw new FormatError(`${end - p} bytes after the last entry`);
  return out;
}

/** Where the last slowVarint ended: a second return value without allocating a tuple in the hot loop. */
let varintEnd = 0;

function slowVarint(buf: Buffer, pos: number, end: number): number {
  let result = 0;
  for (let i = 0; i < 5; i++) {
    if (pos >= end) throw new FormatError(`varint at byte ${pos} runs past the end of the block`);
    const b = buf[pos++]!;
    result += (b & 0x7f) * 2 ** (7 * i);
    if (b < 0x80) {
      if (b === 0) throw new FormatError(`varint at byte ${pos - 1} is not minimal`);
      if (result > 0xffffffff) throw new FormatError(`varint at byte ${pos - 1} is 2^32 or more`);
      varintEnd = pos;
      return result;
    }
  }
  throw new FormatError(`varint at byte ${pos} is longer than 5 bytes`);
}
