import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intersectRanges, rowInRange, type RowRange } from '../../src/storage/range.js';

const b = (s: string) => Buffer.from(s);
// Short rows over a small alphabet, so that ends often coincide.
const row = fc.uint8Array({ maxLength: 3 }).map((a) => Buffer.from(a.map((x) => x % 3)));
const range: fc.Arbitrary<RowRange> = fc.record(
  {
    startRow: row,
    startInclusive: fc.boolean(),
    endRow: row,
    endInclusive: fc.boolean(),
  },
  { requiredKeys: [] },
);

describe('row ranges - intersection', () => {
  it('holds exactly the rows in both ranges', () => {
    fc.assert(
      fc.property(range, range, row, (x, y, r) => {
        expect(rowInRange(r, intersectRanges(x, y))).toBe(rowInRange(r, x) && rowInRange(r, y));
      }),
      { numRuns: 2_000 },
    );
  });

  it('at a shared end row the exclusive end wins, and the defaults are spelled out', () => {
    expect(
      intersectRanges(
        { startRow: b('a'), startInclusive: true, endRow: b('m'), endInclusive: true },
        { startRow: b('a'), startInclusive: false, endRow: b('m') },
      ),
    ).toEqual({ startRow: b('a'), startInclusive: false, endRow: b('m'), endInclusive: false });
    expect(intersectRanges({}, { startRow: b('c') })).toEqual({ startRow: b('c'), startInclusive: true });
    expect(intersectRanges({}, {})).toEqual({});
  });
});
