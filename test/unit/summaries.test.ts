/**
 * A table's summaries (src/manager/summaries.ts) from its tablets' file records: counts added up, families
 * joined, and the answer naming what is not exact — tablets beyond the range, estimated shares, files
 * without statistics.
 */
import { describe, expect, it } from 'vitest';
import { summarize } from '../../src/manager/summaries.js';
import { parseTablet, type FileMeta, type TabletMeta } from '../../src/meta/tablet.js';

const hex = (s: string) => Buffer.from(s).toString('hex');

function tablet(prev: string | null, end: string | null, files: [string, FileMeta][]): TabletMeta {
  const row = end === null ? '0001<' : `0001;${hex(end)}`;
  const meta = parseTablet(row, new Map([['prev', JSON.stringify(prev === null ? null : hex(prev))]]));
  for (const [name, f] of files) meta.files.set(name, f);
  return meta;
}

const file = (
  entries: number,
  deletes: number,
  families: [string, number][],
  ts: [number, number],
): FileMeta => ({
  size: entries * 10,
  entries,
  deletes,
  oldestTs: ts[0],
  newestTs: ts[1],
  keyBytes: entries * 4,
  valueBytes: entries * 6,
  families: families.map(([f, n]) => [hex(f), n]),
  otherFamilies: 0,
});

describe('table summaries', () => {
  const low = tablet(null, 'm', [
    [
      'a.rf',
      file(
        10,
        2,
        [
          ['cf', 6],
          ['meta', 4],
        ],
        [5, 50],
      ),
    ],
    ['b.rf', file(4, 4, [['cf', 4]], [60, 70])],
  ]);
  const high = tablet('m', null, [
    [
      'c.rf',
      file(
        20,
        0,
        [
          ['cf', 15],
          ['x', 5],
        ],
        [1, 40],
      ),
    ],
  ]);

  it('the whole table: every count added up, families joined, exact', () => {
    expect(summarize('t', [low, high])).toEqual({
      table: 't',
      tablets: 2,
      files: 3,
      bytes: 340,
      entries: 34,
      deletes: 6,
      keyBytes: 136,
      valueBytes: 204,
      oldestTs: 1,
      newestTs: 70,
      families: [
        ['cf', 25],
        ['meta', 4],
        ['x', 5],
      ],
      otherFamilies: 0,
      exact: true,
      beyondRange: [],
      estimated: [],
      withoutStats: [],
    });
  });

  it('a range: the tablets overlapping it; one reaching beyond it is counted whole and named', () => {
    const inside = summarize('t', [low, high], Buffer.from('a'), Buffer.from('m'));
    // The low tablet also holds the rows before a: it reaches beyond [a, m].
    expect(inside).toMatchObject({ tablets: 1, entries: 14, beyondRange: ['m'], exact: false });
    const from = summarize('t', [low, high], undefined, Buffer.from('m'));
    expect(from).toMatchObject({ tablets: 1, entries: 14, exact: true });
    const across = summarize('t', [low, high], Buffer.from('k'), Buffer.from('p'));
    expect(across).toMatchObject({ tablets: 2, exact: false, beyondRange: ['m', '(last)'] });
  });

  it('estimated shares and files without statistics are named', () => {
    const shared = tablet(null, null, [
      ['s.rf', { ...file(8, 1, [['cf', 8]], [1, 2]), estimated: true }],
      ['old.rf', { size: 100, entries: 7 }],
    ]);
    const s = summarize('t', [shared]);
    expect(s).toMatchObject({
      entries: 15,
      deletes: 1,
      exact: false,
      estimated: ['s.rf'],
      withoutStats: ['old.rf'],
    });
  });
});
