/**
 * Small helpers of the RFile encoder (writer.ts): block headers, option checks, buffer growth.
 */
import { ExcError } from '../../errors.js';
import { isValidTimestamp, type Entry, type Key } from '../key.js';
import { KIND_DATA, MAX_BLOCK_BYTES, crc32 } from './codec.js';

export function dataHeader(codec: number, number: number, stored: Buffer, rawLength: number, count: number) {
  return {
    kind: KIND_DATA,
    codec,
    number,
    storedLength: stored.length,
    rawLength,
    count,
    payloadCrc: crc32(stored),
  };
}

export function positive(n: number, what: string): number {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BLOCK_BYTES) {
    throw new ExcError('BAD_REQUEST', `${what} must be an integer in [1, ${MAX_BLOCK_BYTES}], got ${n}`);
  }
  return n;
}

export function grow(buf: Buffer, used: number, needed: number): Buffer {
  const bigger = Buffer.allocUnsafe(Math.max(needed, buf.length * 2));
  buf.copy(bigger, 0, 0, used);
  return bigger;
}

/** A key that owns its bytes (does not keep a whole block alive). */
export function copyKey(k: Key): Key {
  return {
    row: Buffer.from(k.row),
    family: Buffer.from(k.family),
    qualifier: Buffer.from(k.qualifier),
    timestamp: k.timestamp,
    deleted: k.deleted,
  };
}

/** BAD_REQUEST unless `e` is a well-formed entry (entry number `n` of `file`). */
export function checkEntry(e: Entry, file: string, n: number): void {
  const k = e.key;
  const ok =
    Buffer.isBuffer(k.row) &&
    Buffer.isBuffer(k.family) &&
    Buffer.isBuffer(k.qualifier) &&
    Buffer.isBuffer(e.value) &&
    typeof k.deleted === 'boolean' &&
    isValidTimestamp(k.timestamp);
  if (!ok) {
    throw new ExcError(
      'BAD_REQUEST',
      `writing ${file}: entry ${n} is malformed (fields must be Buffers, the timestamp an integer in [0, 2^53 - 1], deleted a boolean)`,
      { details: { file } },
    );
  }
}
