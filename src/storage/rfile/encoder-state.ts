/**
 * The state of an RFile encoder at a checkpoint: everything it needs to go on writing a file whose first
 * `offset` bytes are already durable elsewhere (the parts of a checkpointed compaction, ../parts.ts), and
 * produce the very bytes it would have produced without stopping.
 *
 * A checkpoint is only ever taken right after a data block was placed whose last entry ends a cell (the
 * next entry is in another row, family or qualifier) and with no other block sealed yet: the encoder then
 * holds no entry of its own, and what follows is exactly the entries of the cells after that last key.
 *
 * Grammar (JSON, so it can be read in the metadata store; binary fields base64 of the RFile encodings of
 * codec.ts):
 *
 *   State := { "v": 1, "offset": int, "entries": int, "blocks": int,
 *              "firstKey": KeyRecord, "lastKey": KeyRecord,
 *              "index": bytes, "indexCount": int, "indexLastKey": KeyRecord | null,
 *              "root": [ [offset, length, count, KeyRecord] ... ],
 *              "stats"?: Stats | null }
 *   Stats := { "deletes": int, "oldestTs": int, "newestTs": int, "keyBytes": int, "valueBytes": int,
 *              "families": [ [hex, int] ... ], "otherFamilies": int }
 *     offset      bytes of the file written so far (data blocks and sealed index blocks)
 *     entries     entries in them; blocks: data blocks in them (the next one is numbered `blocks`)
 *     firstKey    the file's first key; lastKey: the last key written (it ends a cell)
 *     index       the payload of the index block being filled (IndexRecord*), indexCount records
 *     root        the records of the index blocks already sealed
 *     stats       the figures of the entries written (FileStats); null when there are none. Absent in
 *                 states of older versions, which did not count them: a file resumed from one reports
 *                 no stats.
 *     families    at most MAX_FAMILIES (16) pairs of a family's bytes (lower-case hex) and its entries,
 *                 sorted by family; the entries of the families beyond them are in otherFamilies, so the
 *                 counts add up to `entries`.
 */
import { z } from 'zod';
import { ExcError } from '../../errors.js';
import type { Key } from '../key.js';
import { ByteReader, readKeyRecord, type EncodedIndexRecord } from './codec.js';
import { MAX_FAMILIES, type FileStats } from './file-stats.js';

export interface EncoderState {
  offset: number;
  entries: number;
  blocks: number;
  /** Encoded (KeyRecord) first key of the file. */
  firstKey: Buffer;
  /** Encoded (KeyRecord) last key written: it ends a cell. */
  lastKey: Buffer;
  /** Payload of the index block being filled. */
  index: Buffer;
  indexCount: number;
  /** Encoded last key of the index block being filled (null when it is empty). */
  indexLastKey: Buffer | null;
  root: EncodedIndexRecord[];
  /** Of the entries written; null: none; absent: not recorded (a state of an older version). */
  stats?: FileStats | null;
}

const int = z.number().int().nonnegative();
const b64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/);
const hex = z.string().regex(/^(?:[0-9a-f]{2})*$/);
const statsSchema = z
  .object({
    deletes: int,
    oldestTs: int,
    newestTs: int,
    keyBytes: int,
    valueBytes: int,
    families: z.array(z.tuple([hex, int])).max(MAX_FAMILIES),
    otherFamilies: int,
  })
  .refine((t) => t.oldestTs <= t.newestTs, 'oldestTs is after newestTs')
  // Sorted and distinct: a family counted twice would be merged into one on resume.
  .refine(
    (t) => t.families.every(([name], i) => i === 0 || t.families[i - 1]![0] < name),
    'families are not sorted, or repeat a family',
  );
const stateSchema = z
  .object({
    v: z.literal(1),
    offset: int,
    entries: int,
    blocks: int,
    firstKey: b64,
    lastKey: b64,
    index: b64,
    indexCount: int,
    indexLastKey: b64.nullable(),
    root: z.array(z.tuple([int, int, int, b64])),
    stats: statsSchema.nullable().optional(),
  })
  .refine(
    ({ stats, entries }) =>
      !stats || stats.families.reduce((sum, [, n]) => sum + n, stats.otherFamilies) === entries,
    'the families do not count the entries written',
  );

export function encodeEncoderState(s: EncoderState): string {
  return JSON.stringify({
    v: 1,
    offset: s.offset,
    entries: s.entries,
    blocks: s.blocks,
    firstKey: s.firstKey.toString('base64'),
    lastKey: s.lastKey.toString('base64'),
    index: s.index.toString('base64'),
    indexCount: s.indexCount,
    indexLastKey: s.indexLastKey?.toString('base64') ?? null,
    root: s.root.map((r) => [r.offset, r.length, r.count, r.lastKey.toString('base64')]),
    // Left out when unknown (resumed from an older state), so that a later resume knows it is unknown.
    ...(s.stats === undefined ? {} : { stats: s.stats && statsRecord(s.stats) }),
  });
}

function statsRecord(t: FileStats): FileStats {
  return {
    deletes: t.deletes,
    oldestTs: t.oldestTs,
    newestTs: t.newestTs,
    keyBytes: t.keyBytes,
    valueBytes: t.valueBytes,
    families: t.families.map(([name, n]) => [name, n]),
    otherFamilies: t.otherFamilies,
  };
}

/** BAD_REQUEST when `text` is not a state this version wrote. */
export function decodeEncoderState(text: string): EncoderState {
  let parsed: z.infer<typeof stateSchema>;
  try {
    parsed = stateSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new ExcError('BAD_REQUEST', `malformed checkpoint state: ${(err as Error).message.slice(0, 200)}`);
  }
  return {
    offset: parsed.offset,
    entries: parsed.entries,
    blocks: parsed.blocks,
    firstKey: keyRecord(parsed.firstKey),
    lastKey: keyRecord(parsed.lastKey),
    index: Buffer.from(parsed.index, 'base64'),
    indexCount: parsed.indexCount,
    indexLastKey: parsed.indexLastKey === null ? null : Buffer.from(parsed.indexLastKey, 'base64'),
    root: parsed.root.map(([offset, length, count, key]) => ({
      offset,
      length,
      count,
      lastKey: Buffer.from(key, 'base64'),
    })),
    ...(parsed.stats === undefined ? {} : { stats: parsed.stats }),
  };
}

/** Decodes a KeyRecord (FormatError when malformed). */
export function decodeKeyRecord(buf: Buffer): Key {
  const r = new ByteReader(buf);
  const key = readKeyRecord(r);
  if (r.remaining !== 0) throw new ExcError('BAD_REQUEST', 'malformed checkpoint state: trailing key bytes');
  return key;
}

function keyRecord(text: string): Buffer {
  const buf = Buffer.from(text, 'base64');
  try {
    decodeKeyRecord(buf);
  } catch (err) {
    throw new ExcError('BAD_REQUEST', `malformed checkpoint state: ${(err as Error).message}`);
  }
  return buf;
}
