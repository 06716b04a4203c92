/**
 * Identifiers and random tokens. ULIDs (reservation ids, file names) and request nonces are drawn from a
 * pooled buffer of cryptographically strong randomness: the ulid library's default fetches randomness
 * once per character, and a system call per id is a measurable cost at thousands of ids per second.
 */
import { randomFillSync } from 'node:crypto';
import { decodeTime, ulid as makeUlid } from 'ulid';

const pool = Buffer.alloc(4096);
let offset = pool.length;

/** `n` random bytes (a view into the pool: copy them if you keep them). */
export function randomPooled(n: number): Buffer {
  if (n > pool.length) return randomFillSync(Buffer.alloc(n));
  if (offset + n > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + n);
  offset += n;
  return bytes;
}

/** A new ULID: 48 bits of time, 80 bits of randomness, 26 Crockford base-32 characters. */
const prng = (): number => randomPooled(1)[0]! / 256;
export function ulid(): string {
  return makeUlid(undefined, prng);
}

/** The time (ms since the epoch) a ULID was made; NaN when `id` is not a ULID. */
export function ulidTime(id: string): number {
  try {
    return decodeTime(id);
  } catch {
    return NaN;
  }
}
