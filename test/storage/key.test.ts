import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BlockEntry,
  compareBytes,
  compareEntries,
  compareKeys,
  entryOrder,
  formatKey,
  makeEntry,
  MAX_TIMESTAMP,
  sameCell,
  sameEntryCell,
  type Entry,
  type Key,
} from '../../src/storage/index.js';
import { decodeDataBlock } from '../../src/storage/rfile/block-entry.js';
import { entrySize, writeEntry } from '../../src/storage/rfile/codec.js';
import { runs, wideEntryArb } from './arbitraries.js';

const sign = (n: number): number => (n < 0 ? -1 : n > 0 ? 1 : 0);

/** The key order spelled out on hex strings (which order like unsigned bytes), independently of key.ts. */
function referenceOrder(a: Key, b: Key): number {
  const fields = (k: Key): (string | number)[] => [
    k.row.toString('hex'),
    k.family.toString('hex'),
    k.qualifier.toString('hex'),
    -k.timestamp,
    k.deleted ? 0 : 1,
  ];
  const x = fields(a);
  const y = fields(b);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  return 0;
}

/**
 * Entries as they come out of data blocks: encoded, then decoded, each in a block of its own (a block's
 * entries must be in order, and these are any two entries).
 */
function throughBlock(entries: Entry[]): BlockEntry[] {
  return entries.map((e) => {
    const buf = Buffer.alloc(entrySize(e.key, e.value.length));
    writeEntry(buf, 0, e.key, e.value);
    return decodeDataBlock(buf, 1)[0]!;
  });
}

const bytesArb = fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b));

describe('key order', () => {
  it('examples - row, family, qualifier ascending; newest first; a delete before a put; a prefix first', () => {
    const k = (row: string, ts: number, deleted = false, family = 'f', qualifier = 'q'): Key =>
      makeEntry(row, family, qualifier, ts, '', deleted).key;
    const inOrder = [
      k('', 5),
      k('a', 9),
      k('a', 5, true),
      k('a', 5),
      k('a', 0),
      k('a', 9, false, 'f', 'r'),
      k('a', 9, false, 'g', ''),
      k('ab', 1),
      k('b', MAX_TIMESTAMP),
      k('b', 0),
      { ...k('', 0), row: Buffer.from([0x7f]) },
      { ...k('', 0), row: Buffer.from([0xff]) },
    ];
    for (let i = 0; i < inOrder.length; i++) {
      for (let j = 0; j < inOrder.length; j++) {
        expect(
          sign(compareKeys(inOrder[i]!, inOrder[j]!)),
          `${formatKey(inOrder[i]!)} vs ${formatKey(inOrder[j]!)}`,
        ).toBe(sign(i - j));
      }
    }
  });

  it('compareBytes agrees with Buffer.compare on short and long byte strings', () => {
    fc.assert(
      fc.property(bytesArb, bytesArb, fc.nat(40), (a, b, shared) => {
        // A shared prefix makes the interesting cases (long equal runs, one a prefix of the other) common.
        const prefix = Buffer.alloc(shared, 7);
        const x = Buffer.concat([prefix, a]);
        const y = Buffer.concat([prefix, b]);
        expect(sign(compareBytes(x, y))).toBe(Buffer.compare(x, y));
      }),
      { numRuns: runs(2000) },
    );
  });

  it('compareKeys agrees with the reference order', () => {
    fc.assert(
      fc.property(wideEntryArb, wideEntryArb, (a, b) => {
        expect(sign(compareKeys(a.key, b.key))).toBe(referenceOrder(a.key, b.key));
        expect(sign(compareKeys(a.key, a.key))).toBe(0);
      }),
      { numRuns: runs(2000) },
    );
  });

  it('the encoded-field fast path orders and groups block entries exactly as compareEntries and sameCell', () => {
    const small = fc
      .constantFrom('', 'a', 'ab', 'abcd', 'abcde', 'abcdefgh', 'b', '\xff')
      .map((s) => Buffer.from(s, 'latin1'));
    const entry = fc
      .record({
        row: fc.oneof(small, bytesArb),
        family: small,
        qualifier: fc.oneof(small, bytesArb),
        timestamp: fc.oneof(
          fc.integer({ min: 0, max: 3 }),
          fc.constantFrom(2 ** 32 - 1, 2 ** 32, MAX_TIMESTAMP),
        ),
        deleted: fc.boolean(),
        value: small,
      })
      .map(({ value, ...key }): Entry => ({ key, value }));
    fc.assert(
      fc.property(entry, entry, (a, b) => {
        const [x, y] = throughBlock([a, b]);
        expect(x).toBeInstanceOf(BlockEntry);
        expect(sign(entryOrder(x!, y!))).toBe(sign(compareEntries(a, b)));
        expect(sign(entryOrder(x!, b))).toBe(sign(compareEntries(a, b)));
        expect(sameEntryCell(x!, y!)).toBe(sameCell(a.key, b.key));
        expect(x!.key).toEqual(a.key);
        expect(x!.value.equals(a.value)).toBe(true);
      }),
      { numRuns: runs(3000) },
    );
  });

  it('entries with equal keys are ordered by value, so a merge never depends on input order', () => {
    const a = makeEntry('r', 'f', 'q', 1, 'a');
    const b = makeEntry('r', 'f', 'q', 1, 'b');
    expect(compareKeys(a.key, b.key)).toBe(0);
    expect(compareEntries(a, b)).toBeLessThan(0);
  });

  it('formatKey - printable bytes as is, others escaped, long fields cut', () => {
    expect(formatKey(makeEntry('row\x001', 'cf', 'q"', 42, '', true).key)).toBe(
      '"row\\x001" "cf":"q\\x22" @42 delete',
    );
    expect(formatKey(makeEntry('x'.repeat(100), '', '', 1).key)).toContain('…(100 bytes)');
  });
});
