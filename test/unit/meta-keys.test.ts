import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  binOf,
  formatId,
  parseQueueRow,
  parseTabletRow,
  queueRow,
  tabletRow,
  type EndRow,
  type QueueEntry,
} from '../../src/meta/keys.js';

const id = fc.integer({ min: 0, max: 36 ** 4 - 1 }).map(formatId);
const endRow: fc.Arbitrary<EndRow> = fc.option(
  fc.uint8Array({ maxLength: 12 }).map((a) => Buffer.from(a)),
  { nil: null, freq: 5 },
);
const entry: fc.Arbitrary<QueueEntry> = fc.record({
  queueId: id,
  bin: fc.integer({ min: 0, max: 0xfff }),
  priority: fc.integer({ min: 0, max: 0xffffffff }),
  tableId: id,
  endRow,
});

/** End rows in tablet order: bytes ascending, the last tablet (null) after all. */
function compareEndRows(a: EndRow, b: EndRow): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
  return Buffer.compare(a, b);
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The order queue entries must have: queue, bin, highest priority first, table, end row. */
function compareEntries(a: QueueEntry, b: QueueEntry): number {
  return (
    compareStrings(a.queueId, b.queueId) ||
    a.bin - b.bin ||
    b.priority - a.priority ||
    compareStrings(a.tableId, b.tableId) ||
    compareEndRows(a.endRow, b.endRow)
  );
}

const sign = (n: number): number => Math.sign(n);

describe('meta keys', () => {
  it('tablet rows sort exactly like (table id, end row) with the last tablet last', () => {
    fc.assert(
      fc.property(id, endRow, id, endRow, (t1, e1, t2, e2) => {
        const expected = sign(compareStrings(t1, t2) || compareEndRows(e1, e2));
        expect(sign(compareStrings(tabletRow(t1, e1), tabletRow(t2, e2)))).toBe(expected);
      }),
      { numRuns: 2_000 },
    );
  });

  it('queue rows sort exactly like their tuples: highest priority first within a bin', () => {
    fc.assert(
      fc.property(entry, entry, (a, b) => {
        expect(sign(compareStrings(queueRow(a), queueRow(b)))).toBe(sign(compareEntries(a, b)));
      }),
      { numRuns: 5_000 },
    );
  });

  it('encodings round-trip and the end row never introduces a separator', () => {
    fc.assert(
      fc.property(entry, (e) => {
        const row = queueRow(e);
        expect(parseQueueRow(row)).toEqual(e);
        expect(row.split(':')).toHaveLength(6);
        const tablet = tabletRow(e.tableId, e.endRow);
        expect(parseTabletRow(tablet)).toEqual({ tableId: e.tableId, endRow: e.endRow });
        expect(tablet.slice(4)).toMatch(/^(;[0-9a-f]*|<)$/);
      }),
      { numRuns: 2_000 },
    );
  });

  it('the first tablet row at or after the seek key of a row is the tablet holding it', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.uint8Array({ minLength: 1, maxLength: 6 }).map((a) => Buffer.from(a).toString('hex')),
          {
            maxLength: 8,
          },
        ),
        fc.uint8Array({ maxLength: 7 }).map((a) => Buffer.from(a)),
        (splitHex, row) => {
          const splits = splitHex.map((h) => Buffer.from(h, 'hex')).sort((a, b) => Buffer.compare(a, b));
          const tablets = [...splits.map((s) => tabletRow('0001', s)), tabletRow('0001', null)].sort();
          const seek = tabletRow('0001', row);
          const found = tablets.find((t) => t >= seek)!;
          const index = splits.findIndex((s) => Buffer.compare(row, s) <= 0);
          const expected = index === -1 ? tabletRow('0001', null) : tabletRow('0001', splits[index]!);
          expect(found).toBe(expected);
        },
      ),
    );
  });

  it('bins are stable and within range', () => {
    fc.assert(
      fc.property(id, endRow, fc.integer({ min: 1, max: 4096 }), (t, e, bins) => {
        const b = binOf(tabletRow(t, e), bins);
        expect(b).toBeGreaterThanOrEqual(0);
        expect(b).toBeLessThan(bins);
        expect(binOf(tabletRow(t, e), bins)).toBe(b);
      }),
    );
  });

  it('malformed rows are rejected, not misread', () => {
    for (const bad of [
      '',
      '0001',
      '0001;abc',
      '001;ab',
      '0001;AB',
      '~cq:abcd:0001:00000000:0001',
      '~cq:abcd:1:00000000:0001:<',
    ]) {
      expect(() => (bad.startsWith('~cq') ? parseQueueRow(bad) : parseTabletRow(bad))).toThrow();
    }
  });
});
