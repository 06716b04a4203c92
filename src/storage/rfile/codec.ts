/**
 * RFile: the on-disk format of excompact's sorted key-value files. Format version 1.
 *
 * A file is a run of self-delimiting, checksummed blocks and a footer. Data blocks hold entries in order;
 * index blocks hold one record per data block (its position and last key); the footer holds the root of
 * this two-level index, the entry count and the first and last key. To seek, a reader keeps the root in
 * memory, reads one index block and streams data blocks from there; a full scan streams the file once and
 * verifies every block it passes, index blocks included. Reader and writer memory is a few blocks plus the
 * root (one record per ~1,500 data blocks), whatever the file size.
 *
 * Grammar. Integers are big-endian. varint: unsigned LEB128, minimal, 1-5 bytes, < 2^32. u64: < 2^53.
 *
 *   File         := Block* Footer
 *   Block        := BlockHeader Payload
 *   BlockHeader  := kind:u8 codec:u8 reserved:u16 number:u32 storedLength:u32 rawLength:u32 count:u32
 *                   payloadCrc:u32 headerCrc:u32                                          -- 28 bytes
 *     kind         'D' (0x44) data block | 'I' (0x49) index block
 *     codec        0 none | 1 deflate (raw RFC 1951 stream) | 2 lz4 (an LZ4 block preceded by its
 *                  decompressed length, u32 little-endian) | 3 zstd (one Zstandard frame); index blocks
 *                  always 0. A writer uses its file's codec for every data block that shrinks with it
 *                  and 0 for the others, so the codec is recorded per block (compression.ts).
 *     reserved     0
 *     number       position among the blocks of its kind, from 0 (a misplaced block is detected)
 *     storedLength length of Payload; rawLength its length decompressed (equal for codec 0)
 *     count        entries (data block) or records (index block); at least 1
 *     payloadCrc   CRC-32 (ISO-HDLC, zlib's crc32; crc.ts) of Payload as stored
 *     headerCrc    CRC-32 of the 24 bytes before it
 *   Payload      := storedLength bytes; decompressed: DataPayload | IndexPayload, exactly rawLength bytes
 *   DataPayload  := Entry{count}                    -- strictly by compareEntries: key order, then value
 *   Entry        := flags:u8 rowLen:varint familyLen:varint qualifierLen:varint valueLen:varint
 *                   timestamp:u64 row family qualifier value
 *     flags        bit 0: delete marker; other bits 0
 *   IndexPayload := IndexRecord{count}
 *   IndexRecord  := offset:u64 length:u32 count:u32 lastKey:KeyRecord
 *     in index block j: one per data block it covers, in file order: the block's offset, its length
 *     (header included), its entry count and its last key. The data blocks of index block j are
 *     contiguous and come right before it (after index block j-1).
 *     in the root: one per index block: its offset and length, the number of data blocks it covers, and
 *     the last key of its last data block.
 *   KeyRecord    := flags:u8 rowLen:varint familyLen:varint qualifierLen:varint timestamp:u64
 *                   row family qualifier
 *   Footer       := FooterBody FooterTail
 *   FooterBody   := entryCount:u64 dataBlocks:u32 indexBlocks:u32 [firstKey:KeyRecord lastKey:KeyRecord]
 *                   IndexRecord{indexBlocks}                      -- the root; keys iff entryCount > 0
 *   FooterTail   := bodyLength:u32 bodyCrc:u32 version:u16 reserved:u16 magic:"EXCRFILE"  -- 20 bytes
 *     the last index block ends where FooterBody starts; a file without entries is only a Footer.
 *
 * Every byte of a file is covered by a checksum (a header's, a payload's or the footer body's) or is a
 * constant (version, reserved, magic), so any single damaged byte is detected.
 */
import type { Key } from '../key.js';
import { crc32 } from './crc.js';

export const MAGIC = Buffer.from('EXCRFILE', 'latin1');
export const FORMAT_VERSION = 1;
export const BLOCK_HEADER_SIZE = 28;
export const FOOTER_TAIL_SIZE = 20;
export const KIND_DATA = 0x44;
export const KIND_INDEX = 0x49;
export const CODEC_NONE = 0;
export const CODEC_DEFLATE = 1;
export const CODEC_LZ4 = 2;
export const CODEC_ZSTD = 3;
/** The highest codec this version reads (compression.ts implements them). */
const LAST_CODEC = CODEC_ZSTD;
/**
 * Bound on any block length, written or read: a damaged or hostile length must not make a reader
 * allocate more (a file of a megabyte declaring a block of a gigabyte). The largest block a table writes is
 * its `blockSize` (at most 16 MiB) and the entry that passed it (a value is at most 4 MiB, rpc/entries.ts).
 */
export const MAX_BLOCK_BYTES = 32 * 1024 * 1024;

/** The smallest IndexRecord: offset, length, count and a KeyRecord of empty fields. */
export const MIN_INDEX_RECORD = 16 + 12;
/** The smallest data block as stored: a header and a byte (a deflated entry can be shorter than 13 bytes). */
export const MIN_DATA_BLOCK = BLOCK_HEADER_SIZE + 1;

export { crc32 };

/** A violation of the grammar. Callers turn it into CORRUPT_FILE naming the file and the block. */
export class FormatError extends Error {
  override readonly name = 'FormatError';
}

// ---- primitives ------------------------------------------------------------------------------------

export function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

export function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

export function writeU64(buf: Buffer, pos: number, n: number): number {
  buf.writeUInt32BE(Math.floor(n / 0x100000000), pos);
  buf.writeUInt32BE(n >>> 0, pos + 4);
  return pos + 8;
}

/** Sequential, bounds-checked reads; every violation is a FormatError. */
export class ByteReader {
  constructor(
    readonly buf: Buffer,
    public pos = 0,
    readonly end = buf.length,
  ) {}

  get remaining(): number {
    return this.end - this.pos;
  }

  private need(n: number, what: string): void {
    if (this.pos + n > this.end) {
      throw new FormatError(
        `${what} at byte ${this.pos} runs past the end (${this.end - this.pos} bytes left)`,
      );
    }
  }

  u8(what = 'byte'): number {
    this.need(1, what);
    return this.buf[this.pos++]!;
  }

  u16(what = 'u16'): number {
    this.need(2, what);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  u32(what = 'u32'): number {
    this.need(4, what);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  u64(what = 'u64'): number {
    this.need(8, what);
    const hi = this.buf.readUInt32BE(this.pos);
    const lo = this.buf.readUInt32BE(this.pos + 4);
    if (hi >= 0x200000) throw new FormatError(`${what} at byte ${this.pos} is 2^53 or more`);
    this.pos += 8;
    return hi * 0x100000000 + lo;
  }

  varint(what = 'varint'): number {
    let result = 0;
    for (let i = 0; i < 5; i++) {
      const b = this.u8(what);
      result += (b & 0x7f) * 2 ** (7 * i);
      if (b < 0x80) {
        if (b === 0 && i > 0) throw new FormatError(`${what} at byte ${this.pos - 1} is not minimal`);
        if (result > 0xffffffff) throw new FormatError(`${what} at byte ${this.pos - 1} is 2^32 or more`);
        return result;
      }
    }
    throw new FormatError(`${what} at byte ${this.pos} is longer than 5 bytes`);
  }

  bytes(n: number, what = 'bytes'): Buffer {
    this.need(n, what);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

// ---- block header ----------------------------------------------------------------------------------

export interface BlockHeader {
  kind: number;
  codec: number;
  number: number;
  storedLength: number;
  rawLength: number;
  count: number;
  payloadCrc: number;
}

export function writeBlockHeader(buf: Buffer, pos: number, h: BlockHeader): void {
  buf[pos] = h.kind;
  buf[pos + 1] = h.codec;
  buf.writeUInt16BE(0, pos + 2);
  buf.writeUInt32BE(h.number, pos + 4);
  buf.writeUInt32BE(h.storedLength, pos + 8);
  buf.writeUInt32BE(h.rawLength, pos + 12);
  buf.writeUInt32BE(h.count, pos + 16);
  buf.writeUInt32BE(h.payloadCrc, pos + 20);
  buf.writeUInt32BE(crc32(buf.subarray(pos, pos + 24)), pos + 24);
}

/** Decodes and checks a header (its checksum, kind, codec, reserved bits and lengths). */
export function readBlockHeader(buf: Buffer): BlockHeader {
  if (buf.length < BLOCK_HEADER_SIZE) throw new FormatError(`header truncated (${buf.length} bytes)`);
  if (crc32(buf.subarray(0, 24)) !== buf.readUInt32BE(24)) throw new FormatError('header checksum mismatch');
  const h: BlockHeader = {
    kind: buf[0]!,
    codec: buf[1]!,
    number: buf.readUInt32BE(4),
    storedLength: buf.readUInt32BE(8),
    rawLength: buf.readUInt32BE(12),
    count: buf.readUInt32BE(16),
    payloadCrc: buf.readUInt32BE(20),
  };
  if (h.kind !== KIND_DATA && h.kind !== KIND_INDEX)
    throw new FormatError(`unknown block kind 0x${h.kind.toString(16)}`);
  if (h.codec > LAST_CODEC) throw new FormatError(`unknown codec ${h.codec}`);
  if (h.kind === KIND_INDEX && h.codec !== CODEC_NONE) throw new FormatError('compressed index block');
  if (buf.readUInt16BE(2) !== 0) throw new FormatError('reserved header bits set');
  if (h.storedLength > MAX_BLOCK_BYTES || h.rawLength > MAX_BLOCK_BYTES)
    throw new FormatError('block too large');
  if (h.codec === CODEC_NONE && h.storedLength !== h.rawLength)
    throw new FormatError('stored and raw lengths differ');
  if (h.count === 0) throw new FormatError('empty block');
  return h;
}

// ---- keys and entries ------------------------------------------------------------------------------

export function keyRecordSize(k: Key): number {
  const r = k.row.length;
  const f = k.family.length;
  const q = k.qualifier.length;
  return 1 + varintSize(r) + varintSize(f) + varintSize(q) + 8 + r + f + q;
}

export function writeKeyRecord(buf: Buffer, pos: number, k: Key): number {
  buf[pos++] = k.deleted ? 1 : 0;
  pos = writeVarint(buf, pos, k.row.length);
  pos = writeVarint(buf, pos, k.family.length);
  pos = writeVarint(buf, pos, k.qualifier.length);
  pos = writeU64(buf, pos, k.timestamp);
  pos += k.row.copy(buf, pos);
  pos += k.family.copy(buf, pos);
  pos += k.qualifier.copy(buf, pos);
  return pos;
}

export function encodeKeyRecord(k: Key): Buffer {
  const buf = Buffer.allocUnsafe(keyRecordSize(k));
  writeKeyRecord(buf, 0, k);
  return buf;
}

export function readKeyRecord(r: ByteReader): Key {
  const flags = r.u8('key flags');
  if (flags > 1) throw new FormatError(`bad key flags 0x${flags.toString(16)}`);
  const rowLen = r.varint('row length');
  const familyLen = r.varint('family length');
  const qualifierLen = r.varint('qualifier length');
  const timestamp = r.u64('timestamp');
  return {
    row: r.bytes(rowLen, 'row'),
    family: r.bytes(familyLen, 'family'),
    qualifier: r.bytes(qualifierLen, 'qualifier'),
    timestamp,
    deleted: flags === 1,
  };
}

/** Encoded size of an Entry (see the grammar). */
export function entrySize(k: Key, valueLength: number): number {
  const r = k.row.length;
  const f = k.family.length;
  const q = k.qualifier.length;
  return (
    1 + varintSize(r) + varintSize(f) + varintSize(q) + varintSize(valueLength) + 8 + r + f + q + valueLength
  );
}

export function writeEntry(buf: Buffer, pos: number, k: Key, value: Buffer): number {
  buf[pos++] = k.deleted ? 1 : 0;
  pos = writeVarint(buf, pos, k.row.length);
  pos = writeVarint(buf, pos, k.family.length);
  pos = writeVarint(buf, pos, k.qualifier.length);
  pos = writeVarint(buf, pos, value.length);
  pos = writeU64(buf, pos, k.timestamp);
  pos += k.row.copy(buf, pos);
  pos += k.family.copy(buf, pos);
  pos += k.qualifier.copy(buf, pos);
  pos += value.copy(buf, pos);
  return pos;
}

// ---- index records ---------------------------------------------------------------------------------

export interface IndexRecord {
  offset: number;
  length: number;
  count: number;
  lastKey: Key;
}

/** An index record with its key already encoded (the writer keeps these). */
export interface EncodedIndexRecord {
  offset: number;
  length: number;
  count: number;
  lastKey: Buffer;
}

export function indexRecordSize(r: EncodedIndexRecord): number {
  return 16 + r.lastKey.length;
}

export function writeIndexRecord(buf: Buffer, pos: number, r: EncodedIndexRecord): number {
  pos = writeU64(buf, pos, r.offset);
  buf.writeUInt32BE(r.length, pos);
  buf.writeUInt32BE(r.count, pos + 4);
  pos += 8;
  return pos + r.lastKey.copy(buf, pos);
}

export function readIndexRecord(r: ByteReader): IndexRecord {
  const offset = r.u64('block offset');
  const length = r.u32('block length');
  const count = r.u32('block count');
  return { offset, length, count, lastKey: readKeyRecord(r) };
}

// ---- footer ----------------------------------------------------------------------------------------

export interface Footer {
  entryCount: number;
  dataBlocks: number;
  firstKey: Key | null;
  lastKey: Key | null;
  /** One record per index block. */
  root: IndexRecord[];
}

export function encodeFooter(f: {
  entryCount: number;
  dataBlocks: number;
  firstKey: Buffer | null;
  lastKey: Buffer | null;
  root: EncodedIndexRecord[];
}): Buffer {
  const keysLength = f.entryCount > 0 ? f.firstKey!.length + f.lastKey!.length : 0;
  const bodyLength = 16 + keysLength + f.root.reduce((n, r) => n + indexRecordSize(r), 0);
  const buf = Buffer.allocUnsafe(bodyLength + FOOTER_TAIL_SIZE);
  let pos = writeU64(buf, 0, f.entryCount);
  buf.writeUInt32BE(f.dataBlocks, pos);
  buf.writeUInt32BE(f.root.length, pos + 4);
  pos += 8;
  if (f.entryCount > 0) {
    pos += f.firstKey!.copy(buf, pos);
    pos += f.lastKey!.copy(buf, pos);
  }
  for (const r of f.root) pos = writeIndexRecord(buf, pos, r);
  buf.writeUInt32BE(bodyLength, pos);
  buf.writeUInt32BE(crc32(buf.subarray(0, bodyLength)), pos + 4);
  buf.writeUInt16BE(FORMAT_VERSION, pos + 8);
  buf.writeUInt16BE(0, pos + 10);
  MAGIC.copy(buf, pos + 12);
  return buf;
}

/** Checks the 20-byte tail and returns the body's length and checksum. */
export function readFooterTail(tail: Buffer): { bodyLength: number; bodyCrc: number } {
  if (!tail.subarray(12, 20).equals(MAGIC)) throw new FormatError('not an RFile (no magic at the end)');
  const version = tail.readUInt16BE(8);
  if (version !== FORMAT_VERSION) throw new FormatError(`unsupported format version ${version}`);
  if (tail.readUInt16BE(10) !== 0) throw new FormatError('reserved footer bits set');
  return { bodyLength: tail.readUInt32BE(0), bodyCrc: tail.readUInt32BE(4) };
}

export function readFooterBody(body: Buffer): Footer {
  const r = new ByteReader(body);
  const entryCount = r.u64('entry count');
  const dataBlocks = r.u32('data block count');
  const indexBlocks = r.u32('index block count');
  const firstKey = entryCount > 0 ? readKeyRecord(r) : null;
  const lastKey = entryCount > 0 ? readKeyRecord(r) : null;
  // A damaged count must not make us loop (nearly) for ever.
  if (indexBlocks * MIN_INDEX_RECORD > r.remaining)
    throw new FormatError(`index block count ${indexBlocks} exceeds the footer`);
  const root: IndexRecord[] = [];
  for (let i = 0; i < indexBlocks; i++) root.push(readIndexRecord(r));
  if (r.remaining !== 0) throw new FormatError(`${r.remaining} unexpected bytes at the end of the footer`);
  return { entryCount, dataBlocks, firstKey, lastKey, root };
}
