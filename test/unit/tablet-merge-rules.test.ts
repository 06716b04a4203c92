/**
 * Tablet merges, alone (src/tserver/tablet-merge-rules.ts): what blocks a merge, and what the merged
 * tablet reads — each shared file only in the rows of the tablets that referenced it. Real tablet
 * servers merge tablets in test/cluster/tablet-merge.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ingestRow } from '../../src/meta/ingest-ids.js';
import { tabletRow } from '../../src/meta/keys.js';
import { tabletRows } from '../../src/meta/rows.js';
import { parseTablet, type TabletMeta } from '../../src/meta/tablet.js';
import type { FileProfile } from '../../src/storage/index.js';
import { decideTabletMerge, letGoForMerge, mergeBlocker } from '../../src/tserver/tablet-merge-rules.js';

const b = (s: string) => Buffer.from(s);
const ME = { server: 'ts:1', session: '00000000000000aa' };

/** Tablet (prev, end] of table 0001, hosted here, with files of 100 bytes each. */
function tablet(prev: string | null, end: string | null, files: string[]): TabletMeta {
  const meta = parseTablet(
    tabletRow('0001', end === null ? null : b(end)),
    new Map([['prev', prev === null ? 'null' : JSON.stringify(b(prev).toString('hex'))]]),
  );
  meta.loc = ME;
  meta.version = 3;
  for (const f of files) meta.files.set(f, { size: 100, entries: 10 });
  return meta;
}
const profile = (first: string, last: string): FileProfile => ({
  firstRow: b(first),
  lastRow: b(last),
  blocks: [{ row: b(last), bytes: 100 }],
});

describe('tablet merge', () => {
  it('blocked by anything running, a gap, another table, or a request of only some of them', () => {
    const a = tablet(null, 'g', ['f1']);
    const c = tablet('g', null, ['f2']);
    expect(mergeBlocker([a, c])).toBeUndefined();
    expect(mergeBlocker([a])).toMatch(/fewer than two/);
    expect(mergeBlocker([a, tablet('h', null, [])])).toMatch(/does not start where/);
    const held = tablet('g', null, []);
    held.holds.set('E', {
      tablet: 'x',
      inputs: ['f'],
      output: 'o',
      kind: 'system',
      clip: {},
      nowMs: 1,
      share: 1,
      at: 1,
    });
    expect(mergeBlocker([a, held])).toMatch(/holds files/);
    const asked = tablet('g', null, []);
    asked.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    expect(mergeBlocker([a, asked])).toMatch(/user compaction U1 is pending on only some/);
    a.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    expect(mergeBlocker([a, asked])).toBeUndefined();
  });

  it('a file shared by all of them is read whole; one of some of them only in their rows', () => {
    // "shared" was split across all three; "left" only the first two reference; "own" is the last one's
    // own file, holding only its rows (its profile says so): no fence.
    const t1 = tablet(null, 'g', ['shared', 'left']);
    const t2 = tablet('g', 'p', ['shared', 'left']);
    const t3 = tablet('p', null, ['shared', 'own']);
    t1.ingests.set('B.0', { at: 5 });
    t3.ingests.set('B.0', { at: 7 });
    const profiles = new Map([
      ['shared', profile('a', 'z')],
      ['left', profile('a', 'z')],
      ['own', profile('q', 'y')],
    ]);
    const { merged, change } = decideTabletMerge([t1, t2, t3], profiles, 100);
    expect(merged.row).toBe(t3.row);
    expect(merged.prevEndRow).toBeNull();
    expect(merged.files.get('shared')).toEqual({ size: 300, entries: 30 });
    expect(merged.files.get('left')).toEqual({
      size: 200,
      entries: 20,
      fence: [tabletRows(null, b('p'))],
    });
    expect(merged.files.get('own')).toEqual({ size: 100, entries: 10 });
    // A batch the first applied whole became its rows; the last's too.
    expect(merged.ingests.get('B.0')).toEqual({
      at: 5,
      rows: [tabletRows(null, b('g')), tabletRows(b('p'), null)],
    });
    // One mutation: the others' rows (and their ingest ids) go, conditional on their location and version.
    expect(change.deleteRows).toEqual([t1.row, ingestRow(t1.row), t2.row, ingestRow(t2.row)]);
    expect(change.conditions).toContainEqual({ op: 'equals', row: t1.row, col: 'ver', value: '3' });
    expect(change.conditions).toContainEqual({
      op: 'equals',
      row: t2.row,
      col: 'loc',
      value: JSON.stringify(ME),
    });
    change.apply(t3);
    expect(t3.prevEndRow).toBeNull();
    expect([...t3.files.keys()].sort()).toEqual(['left', 'own', 'shared']);
  });

  it('without a profile a file keeps its fence; fences already there are kept within each tablet', () => {
    const t1 = tablet(null, 'g', []);
    t1.files.set('f', { size: 50, entries: 5, fence: [tabletRows(b('c'), b('e'))] });
    const t2 = tablet('g', null, ['g2']);
    const { merged } = decideTabletMerge([t1, t2], new Map(), 100);
    expect(merged.files.get('f')?.fence).toEqual([tabletRows(b('c'), b('e'))]);
    expect(merged.files.get('g2')?.fence).toEqual([tabletRows(b('g'), null)]);
  });

  it('after the wait: split jobs, kept checkpoints and holds are let go, their objects marked', () => {
    const t = tablet(null, 'g', ['f']);
    t.splits.set('S', {
      inputs: ['f'],
      kind: 'system',
      allFiles: true,
      settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: false },
      bounds: ['61'],
      done: [{ output: 'sub0.rf', size: 5, entries: 1 }, null],
      createdAt: 1,
    });
    const change = letGoForMerge(t, 42)!;
    expect(change.puts).toEqual([{ row: '~del:sub0.rf', col: 'at', value: '42' }]);
    change.apply(t);
    expect(mergeBlocker([t, tablet('g', null, [])])).toBeUndefined();
    expect(letGoForMerge(t, 43)).toBeUndefined();
  });
});
