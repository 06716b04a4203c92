/**
 * The client's routing by binary search: for any table and any row it finds the tablet a linear reading
 * of the tablets finds (the first whose end row is at or after the row), and the first tablet of a scan
 * likewise, including rows equal to an end row, before the first and past the last.
 */
import { describe, expect, it } from 'vitest';
import { router, routesOf, tabletFor } from '../../src/client/routing.js';
import type { TabletView } from '../../src/meta/views.js';

const view = (i: number, end: Buffer | null): TabletView =>
  ({
    tablet: `t;${i}`,
    endRowHex: end === null ? null : end.toString('hex'),
    prevEndRowHex: null,
  }) as unknown as TabletView;

/** A table of `n` tablets split at sorted random rows (the last one unbounded). */
function table(n: number, seed: number): { tablets: TabletView[]; splits: Buffer[] } {
  let x = seed;
  const next = () => (x = (x * 1103515245 + 12345) % 2 ** 31);
  const splits = [
    ...new Set(
      Array.from({ length: n - 1 }, () =>
        Buffer.from([(next() >>> 16) % 16, (next() >>> 16) % 16]).toString('hex'),
      ),
    ),
  ]
    .sort()
    .map((h) => Buffer.from(h, 'hex'));
  return { tablets: [...splits.map((s, i) => view(i, s)), view(splits.length, null)], splits };
}

const linear = (tablets: TabletView[], row: Buffer): string =>
  tablets.find((t) => t.endRowHex === null || Buffer.compare(row, Buffer.from(t.endRowHex, 'hex')) <= 0)!
    .tablet;

describe('client routing', () => {
  it('routes every row where a linear reading does, in tables of 1 to 60 tablets', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const { tablets, splits } = table(1 + (seed % 60), seed);
      const route = router(tablets);
      const rows = [
        Buffer.alloc(0),
        ...splits,
        ...splits.map((s) => Buffer.concat([s, Buffer.from([0])])),
        Buffer.from([9, 9, 9]),
      ];
      for (const row of rows) expect(route(row)).toBe(linear(tablets, row));
    }
  });

  it('finds the first tablet of a scan after a row or from a start row', () => {
    const { tablets, splits } = table(30, 7);
    for (const row of [Buffer.alloc(0), ...splits, Buffer.from([9])]) {
      const after = tablets.find(
        (t) => t.endRowHex === null || Buffer.compare(Buffer.from(t.endRowHex, 'hex'), row) > 0,
      );
      expect(tabletFor(tablets, row, undefined)).toBe(after);
      expect(tabletFor(tablets, undefined, row)!.tablet).toBe(linear(tablets, row));
    }
    expect(tabletFor(tablets, undefined, undefined)).toBe(tablets[0]);
  });

  it('builds the routes of a list once, and finds its tablets by name', () => {
    const { tablets } = table(10, 3);
    expect(routesOf(tablets)).toBe(routesOf(tablets));
    expect(routesOf(tablets).named(tablets[4]!.tablet)).toBe(tablets[4]);
    expect(routesOf(tablets).named('t;nope')).toBeUndefined();
  });
});
