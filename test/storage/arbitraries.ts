/**
 * fast-check generators for keys, entries, files and settings. The domain is small on purpose — a few
 * rows, families and qualifiers, timestamps 0..30 — so that random files collide: the same cell in many
 * files, equal timestamps, deletes over puts, duplicates. Bytes 0x00 and 0xff check unsigned order.
 */
import fc from 'fast-check';
import { rangeIsEmpty } from '../../src/storage/range.js';
import {
  compareEntries,
  MAX_TIMESTAMP,
  type Entry,
  type FilterSpec,
  type RowRange,
} from '../../src/storage/index.js';
import type { ModelSettings } from './model.js';

const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

export const ROWS = ['', 'a', 'ab', 'abc', 'b', 'ba', 'c', '\x00', 'a\x00', '\xff'];
export const rowArb = fc.constantFrom(...ROWS).map(latin1);
const familyArb = fc.constantFrom('', 'f', 'g', '\xff').map(latin1);
const qualifierArb = fc.constantFrom('', 'q', 'r').map(latin1);
const valueArb = fc.constantFrom('', 'v', 'w', 'xx').map(latin1);
export const timestampArb = fc.oneof(
  { weight: 20, arbitrary: fc.integer({ min: 0, max: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom(2 ** 32 - 1, 2 ** 32, MAX_TIMESTAMP) },
);

export const entryArb: fc.Arbitrary<Entry> = fc
  .record({
    row: rowArb,
    family: familyArb,
    qualifier: qualifierArb,
    timestamp: timestampArb,
    // About one entry in four is a delete marker.
    deleted: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    value: valueArb,
  })
  .map(({ value, ...key }) => ({ key, value }));

/** Entries with arbitrary bytes and sizes, for format round trips (multi-byte varints, long fields). */
export const wideEntryArb: fc.Arbitrary<Entry> = fc
  .record({
    row: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    family: fc.uint8Array({ maxLength: 20 }).map((b) => Buffer.from(b)),
    qualifier: fc.uint8Array({ maxLength: 140 }).map((b) => Buffer.from(b)),
    timestamp: fc.oneof(
      fc.integer({ min: 0, max: 1000 }),
      fc.constantFrom(0, 2 ** 32, MAX_TIMESTAMP),
      fc.maxSafeNat(),
    ),
    deleted: fc.boolean(),
    value: fc
      .oneof(
        { weight: 5, arbitrary: fc.uint8Array({ maxLength: 300 }) },
        {
          weight: 1,
          arbitrary: fc.integer({ min: 1000, max: 20_000 }).map((n) => new Uint8Array(n).fill(n & 0xff)),
        },
      )
      .map((b) => Buffer.from(b)),
  })
  .map(({ value, ...key }) => ({ key, value }));

export function sorted(entries: readonly Entry[]): Entry[] {
  return [...entries].sort(compareEntries);
}

/** A sorted file's worth of entries. */
export const fileArb = (maxLength = 25): fc.Arbitrary<Entry[]> =>
  fc.array(entryArb, { maxLength }).map(sorted);

const prefixes = fc.array(fc.constantFrom('a', 'ab', 'b', '\x00'), { minLength: 1, maxLength: 2 });
const families = fc.array(fc.constantFrom('', 'f', 'g'), { minLength: 1, maxLength: 2 });
const rowString = fc.constantFrom('', 'a', 'ab', 'b', 'c');

export const filterArb: fc.Arbitrary<FilterSpec> = fc.oneof(
  fc.record({ name: fc.constant('dropRowPrefix'), options: fc.record({ prefixes }) }),
  fc.record({ name: fc.constant('keepRowPrefix'), options: fc.record({ prefixes }) }),
  fc.record({ name: fc.constant('dropFamily'), options: fc.record({ families }) }),
  fc.record({ name: fc.constant('keepFamily'), options: fc.record({ families }) }),
  fc.record({
    name: fc.constant('keepRowRange'),
    options: fc
      .record(
        { start: rowString, startInclusive: fc.boolean(), end: rowString, endInclusive: fc.boolean() },
        { requiredKeys: [] },
      )
      // A range that keeps no row is refused (it would delete everything): not a filter anyone can run.
      .filter(
        (o) =>
          !rangeIsEmpty({
            ...o,
            startRow: o.start === undefined ? undefined : Buffer.from(o.start),
            endRow: o.end === undefined ? undefined : Buffer.from(o.end),
          }),
      ),
  }),
);

export const filtersArb = fc.array(filterArb, { maxLength: 2 });

export const settingsArb: fc.Arbitrary<ModelSettings> = fc.record({
  versions: fc.integer({ min: 1, max: 3 }),
  ttlMs: fc.option(fc.integer({ min: 0, max: 25 }), { nil: undefined }),
  nowMs: fc.integer({ min: 0, max: 40 }),
  filters: fc.oneof(
    { weight: 3, arbitrary: fc.constant<FilterSpec[]>([]) },
    { weight: 1, arbitrary: filtersArb },
  ),
  dropDeletes: fc.boolean(),
});

export const rangeArb: fc.Arbitrary<RowRange> = fc.record(
  { startRow: rowArb, startInclusive: fc.boolean(), endRow: rowArb, endInclusive: fc.boolean() },
  { requiredKeys: [] },
);

/** Property-test runs; EXC_PROPERTY_RUNS raises them for a deeper search. */
export function runs(base: number): number {
  const n = Number(process.env.EXC_PROPERTY_RUNS);
  return Number.isFinite(n) && n > 0 ? n : base;
}
