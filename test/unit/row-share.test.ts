/**
 * How a file's bytes spread over rows (src/storage/row-share.ts): the estimate the tablet rules use for a
 * daughter's share of a shared file and for the middle of a tablet.
 */
import { describe, expect, it } from 'vitest';
import { bytesWithin, fractionAt, middleOf, rowSpans } from '../../src/storage/row-share.js';

const b = (s: string) => Buffer.from(s);

describe('row share', () => {
  it('a row between two others falls by its leading bytes after their common prefix', () => {
    // Digits are ten of 256 byte values: "50000" is a little more than 5/9 of the way from "0…" to "9…".
    expect(fractionAt(b('row00000'), b('row99999'), b('row50000'))).toBeCloseTo(0.553, 2);
    expect(fractionAt(b('a'), b('c'), b('b'))).toBeCloseTo(0.5, 5);
    expect(fractionAt(b('a'), b('c'), b('a'))).toBe(0);
    expect(fractionAt(b('a'), b('c'), b('z'))).toBe(1);
    // Always within [0, 1], for rows of any length.
    const f = fractionAt(b('ab'), b('abz'), b('abc\x00\x00\x00\x00\x00\x00\x00'));
    expect(f).toBeGreaterThanOrEqual(0);
    expect(f).toBeLessThanOrEqual(1);
  });

  it("a file's blocks hold the rows after the one before; a tablet's share of them sums to the whole", () => {
    const spans = rowSpans({
      firstRow: b('b'),
      lastRow: b('y'),
      blocks: [
        { row: b('h'), bytes: 600 },
        { row: b('y'), bytes: 1700 },
      ],
    });
    expect(spans.map((s) => [s.lo.toString(), s.hi.toString()])).toEqual([
      ['b', 'h'],
      ['h', 'y'],
    ]);
    const low = spans.reduce((n, s) => n + bytesWithin(s, { lo: null, hi: b('m') }), 0);
    const high = spans.reduce((n, s) => n + bytesWithin(s, { lo: b('m'), hi: null }), 0);
    expect(low + high).toBeCloseTo(2300, 6);
    // All of the first block and 5/17 of the second.
    expect(low).toBeCloseTo(600 + 500, 6);
    expect(rowSpans({ firstRow: null, lastRow: null, blocks: [] })).toEqual([]);
  });

  it('the middle is a row strictly inside with bytes on both sides, or none', () => {
    const spans = rowSpans({
      firstRow: b('a'),
      lastRow: b('z'),
      blocks: ['e', 'j', 'o', 't', 'z'].map((r) => ({ row: b(r), bytes: 100 })),
    });
    expect(middleOf(spans, { lo: null, hi: null })?.toString()).toBe('j');
    expect(middleOf(spans, { lo: b('e'), hi: null })?.toString()).toBe('o');
    // Four one-block files of rows row00000..row99999: a short row between, near the middle.
    const small = Array.from({ length: 4 }, () =>
      rowSpans({
        firstRow: b('row00012'),
        lastRow: b('row99987'),
        blocks: [{ row: b('row99987'), bytes: 9_000 }],
      }),
    ).flat();
    expect(middleOf(small, { lo: null, hi: null })?.toString()).toBe('row4');
    // One row holds it all.
    expect(middleOf([{ lo: b('k'), hi: b('k'), bytes: 9 }], { lo: null, hi: null })).toBeUndefined();
  });
});
