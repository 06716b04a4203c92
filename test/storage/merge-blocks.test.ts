import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mergeBatches, MAX_TIMESTAMP, type Entry } from '../../src/storage/index.js';
import type { BlockEntry } from '../../src/storage/rfile/block-entry.js';
import { compareBlockEntries, decodeDataBlock, sameBlockCell } from '../../src/storage/rfile/block-entry.js';
import { entrySize, FormatError, writeEntry } from '../../src/storage/rfile/codec.js';
import {
  compareFrom,
  nextCode,
  OVC_CAP,
  OVC_EQUAL,
  OVC_FAR,
  OVC_MIN_OFFSET_CODE,
  ovcOffset,
  sameCellByCode,
} from '../../src/storage/rfile/offset-value.js';
import { mergeBlockBatches } from '../../src/storage/iterators/merge-blocks.js';
import { runs } from './arbitraries.js';

const sign = (n: number): number => (n < 0 ? -1 : n > 0 ? 1 : 0);

/** Encodes entries into one data block payload and decodes it (in the given order, sorted or not). */
function block(entries: Entry[]): Buffer {
  const buf = Buffer.alloc(entries.reduce((n, e) => n + entrySize(e.key, e.value.length), 0));
  let pos = 0;
  for (const e of entries) pos = writeEntry(buf, pos, e.key, e.value);
  return buf;
}

/** Each entry decoded alone (in a block of its own), so no order is assumed between them. */
function alone(e: Entry): BlockEntry {
  return decodeDataBlock(block([e]), 1)[0]!;
}

const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');
/** Long shared prefixes (past the codes' 8 KB cap), short ones, and prefixes of each other. */
const prefix = fc.constantFrom('', 'a', 'ab', 'row00000', 'x'.repeat(4093), 'x'.repeat(4100)).map(latin1);
const tail = fc.constantFrom('', '\x00', '1', '12', '123', '\xff', '2').map(latin1);
const field = fc.tuple(prefix, tail).map(([p, t]) => Buffer.concat([p, t]));
const small = fc.constantFrom('', 'f', 'fa', '\xff').map(latin1);

const entryArb: fc.Arbitrary<Entry> = fc
  .record({
    row: field,
    family: small,
    qualifier: fc.oneof(small, field),
    timestamp: fc.oneof(
      fc.integer({ min: 0, max: 3 }),
      fc.constantFrom(0xffff, 0x10000, 2 ** 32 - 1, 2 ** 32, 2 ** 48, MAX_TIMESTAMP),
    ),
    deleted: fc.boolean(),
    value: fc.oneof(small, field),
  })
  .map(({ value, ...key }): Entry => ({ key, value }));

/** The symbol sequence of an entry, spelled out independently of offset-value.ts (its module comment). */
function symbols(e: Entry): number[] {
  const k = e.key;
  const field = (b: Buffer): number[] => [...b].map((x) => x + 1).concat(0);
  const ts = Buffer.alloc(8);
  ts.writeBigUInt64BE(BigInt(k.timestamp));
  return [
    ...field(k.row),
    ...field(k.family),
    ...field(k.qualifier),
    ...[...ts].map((x) => 255 - x),
    k.deleted ? 0 : 1,
    ...field(e.value),
  ];
}

/** The code of b relative to a ≤ b, from the symbol sequences. */
function referenceCode(a: Entry, b: Entry): number {
  const x = symbols(a);
  const y = symbols(b);
  let i = 0;
  while (i < y.length && x[i] === y[i]) i++;
  if (i === y.length && x.length === y.length) return OVC_EQUAL;
  if (i >= OVC_CAP) return OVC_FAR;
  return (OVC_CAP - i) * 2 ** 18 + y[i]! * 512 + (y[i + 1] ?? 0);
}

describe('offset-value codes', () => {
  it('compareFrom orders as compareBlockEntries, and its code says where the entries first differ', () => {
    fc.assert(
      fc.property(entryArb, entryArb, entryArb, (p, q, r) => {
        const [x, y, z] = [p, q, r].map(alone).sort(compareBlockEntries) as [
          BlockEntry,
          BlockEntry,
          BlockEntry,
        ];
        for (const [a, b] of [
          [x, y],
          [y, z],
          [z, x],
          [x, x],
        ] as const) {
          const c = compareFrom(a, b, 0);
          expect(sign(c)).toBe(sign(compareBlockEntries(a, b)));
          const [lo, hi] = c <= 0 ? [a, b] : [b, a];
          expect(Math.abs(c)).toBe(referenceCode(lo, hi));
        }
        // y and z both ≥ x: their codes relative to x order them, unless equal.
        const cy = -compareFrom(x, y, 0);
        const cz = -compareFrom(x, z, 0);
        if (cy !== cz) {
          expect(sign(compareBlockEntries(y, z))).toBe(sign(cy - cz));
          // The loser's code relative to the winner: the same as relative to x, or, when the two codes
          // share offset and first symbol, the one nextCode makes.
          const [loser, lc] = cy < cz ? [z, cz] : [y, cy];
          const shared = cy >> 9 === cz >> 9 && Math.min(cy, cz) >= OVC_MIN_OFFSET_CODE;
          expect(Math.abs(compareFrom(y, z, 0))).toBe(shared ? nextCode(loser, lc) : lc);
        } else if (cy >= OVC_MIN_OFFSET_CODE) {
          // Equal codes: the entries agree up to and including those two symbols; comparing from the
          // next one gives the same answer as from the start.
          expect(compareFrom(y, z, ovcOffset(cy) + 2)).toBe(compareFrom(y, z, 0));
        }
        // Whether y has x's cell, read from the code.
        const same = sameCellByCode(y, cy);
        if (same !== undefined) expect(same).toBe(sameBlockCell(x, y));
      }),
      { numRuns: runs(3000) },
    );
  });

  it('decodeDataBlock gives each entry its code relative to the one before, and refuses a block out of order', () => {
    fc.assert(
      fc.property(fc.array(entryArb, { minLength: 2, maxLength: 8 }), (entries) => {
        const sorted = [...entries].map(alone).sort(compareBlockEntries);
        const decoded = decodeDataBlock(
          block(sorted.map((e) => ({ key: e.key, value: e.value }))),
          sorted.length,
        );
        for (let i = 1; i < decoded.length; i++) {
          expect(decoded[i]!.ovc).toBe(-compareFrom(decoded[i - 1]!, decoded[i]!, 0));
        }
        const reversed = [...sorted].reverse();
        if (compareBlockEntries(reversed[0]!, reversed[reversed.length - 1]!) > 0) {
          const bytes = block(reversed.map((e) => ({ key: e.key, value: e.value })));
          expect(() => decodeDataBlock(bytes, reversed.length)).toThrow(FormatError);
        }
      }),
      { numRuns: runs(500) },
    );
  });
});

/** Sources for a merge: each sorted, cut into batches, some taken whole from one block, some not. */
const sourcesArb = fc
  .array(
    fc.record({
      entries: fc.array(entryArb, { maxLength: 12 }),
      cuts: fc.array(fc.nat(12), { maxLength: 4 }),
      // Skip some entries of the block: a batch whose neighbours are not neighbours in their block.
      skip: fc.array(fc.boolean(), { maxLength: 12 }),
    }),
    { maxLength: 6 },
  )
  .map((specs) =>
    specs.map(({ entries, cuts, skip }) => {
      const sorted = entries.map(alone).sort(compareBlockEntries);
      const decoded = decodeDataBlock(
        block(sorted.map((e) => ({ key: e.key, value: e.value }))),
        sorted.length,
      );
      const kept = decoded.filter((_, i) => !skip[i]);
      const at = [...new Set(cuts.map((c) => Math.min(c, kept.length)))].sort((a, b) => a - b);
      const batches: BlockEntry[][] = [];
      let from = 0;
      for (const c of [...at, kept.length]) {
        batches.push(kept.slice(from, c));
        from = c;
      }
      return batches;
    }),
  );

describe('mergeBlockBatches', () => {
  it('merges exactly as mergeBatches with compareBlockEntries, and tells accept when the cell repeats', async () => {
    await fc.assert(
      fc.asyncProperty(sourcesArb, async (sources) => {
        const expected: BlockEntry[] = [];
        for await (const b of mergeBatches<BlockEntry>(sources, () => true, { compare: compareBlockEntries }))
          expected.push(...b);
        const got: BlockEntry[] = [];
        let prev: BlockEntry | null = null;
        const accept = (e: BlockEntry, same: boolean | undefined): boolean => {
          if (same !== undefined) expect(same).toBe(prev !== null && sameBlockCell(prev, e));
          prev = e;
          return true;
        };
        for await (const b of mergeBlockBatches(sources, accept)) got.push(...b);
        expect(got.length).toBe(expected.length);
        // The same objects in the same order: equal entries come out in source order in both.
        for (let i = 0; i < got.length; i++) expect(got[i]).toBe(expected[i]);
      }),
      { numRuns: runs(1000) },
    );
  });

  it('equal first heads come out in source order whatever the shape of the tree (found by a review)', async () => {
    // With k = 3 the leaves of sources 1 and 2 sit under one node and source 0's beside it: the first
    // tournament gave equal heads to the left child, and source 1's entry came out before source 0's.
    const e: Entry = {
      key: { row: latin1('r'), family: latin1('f'), qualifier: latin1('q'), timestamp: 1, deleted: false },
      value: latin1('v'),
    };
    for (const k of [3, 5, 6, 7]) {
      const sources = Array.from({ length: k }, (_, i) => (i < 2 ? [[alone(e)]] : []));
      const got: BlockEntry[] = [];
      for await (const b of mergeBlockBatches(sources, () => true)) got.push(...b);
      expect(got, `k = ${k}`).toEqual([sources[0]![0]![0], sources[1]![0]![0]]);
      expect(got[0], `k = ${k}`).toBe(sources[0]![0]![0]);
    }
  });

  it('drops what accept refuses and refuses a source out of order', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((row) =>
      alone({
        key: { row: latin1(row), family: latin1('f'), qualifier: latin1('q'), timestamp: 1, deleted: false },
        value: latin1(''),
      }),
    ) as [BlockEntry, BlockEntry, BlockEntry];
    const kept: BlockEntry[] = [];
    for await (const batch of mergeBlockBatches([[[a, c]], [[b]]], (e) => e !== b)) kept.push(...batch);
    expect(kept).toEqual([a, c]);
    const run = async (): Promise<void> => {
      for await (const batch of mergeBlockBatches([[[c], [a]]], () => true)) void batch;
    };
    await expect(run()).rejects.toThrow(/out of order/);
  });

  it('an output batch keeps at most about 1 MiB of blocks alive: large values do not keep thousands of blocks alive', async () => {
    const value = Buffer.alloc(300_000, 0x61);
    const entries = (prefix: string) =>
      Array.from({ length: 20 }, (_, i) =>
        alone({
          key: {
            row: latin1(`${prefix}${String(i).padStart(3, '0')}`),
            family: latin1('f'),
            qualifier: latin1('q'),
            timestamp: 1,
            deleted: false,
          },
          value,
        }),
      );
    const sizes: number[] = [];
    let total = 0;
    for await (const batch of mergeBlockBatches([[entries('a')], [entries('b')]], () => true)) {
      sizes.push(batch.length);
      total += batch.length;
    }
    expect(total).toBe(40);
    // 300 KB each: the fourth passes 1 MiB and the batch goes.
    expect(Math.max(...sizes)).toBe(4);
  });

  it('an output batch keeps at most about 1 MiB of blocks alive however few of their entries it keeps', async () => {
    // Two sources of 150 blocks of about 16 KiB: a tiny entry, kept, and one of a large value, dropped
    // (as a filter or the versioning rule might). The tiny entries' own bytes come to a few KB.
    const filler = Buffer.alloc(16_000, 0x62);
    const source = (prefix: string): BlockEntry[][] =>
      Array.from({ length: 150 }, (_, i) => {
        const row = latin1(`${prefix}${String(i).padStart(4, '0')}`);
        const key = (qualifier: string): Entry['key'] => ({
          row,
          family: latin1('f'),
          qualifier: latin1(qualifier),
          timestamp: 1,
          deleted: false,
        });
        const entries = [
          { key: key('a'), value: latin1('v') },
          { key: key('b'), value: filler },
        ];
        return decodeDataBlock(block(entries), entries.length);
      });
    const sources = [source('a'), source('b')];
    const blockBytes = sources[0]![0]![0]!.block.length;
    const batches: BlockEntry[][] = [];
    for await (const batch of mergeBlockBatches(sources, (e) => e.end - e.valueStart < 100))
      batches.push(batch);
    expect(batches.flat().length).toBe(300);
    // What each batch keeps alive: the distinct blocks its entries are views of.
    const pinned = batches.map((b) =>
      [...new Set(b.map((e) => e.block))].reduce((n, block) => n + block.length, 0),
    );
    const limit = 1 << 20;
    for (const [i, bytes] of pinned.entries()) {
      // At most the limit, the block that passed it, and one block per source counted by the batch
      // before; and every batch but the last ends by this rule, not sooner.
      expect(bytes).toBeLessThanOrEqual(limit + 3 * blockBytes);
      if (i < pinned.length - 1) expect(bytes).toBeGreaterThanOrEqual(limit);
    }
  });
});
