/**
 * The manager's change feed: a tablet server following it sees every row others changed after its
 * cursor, once, and is told to re-read everything whenever the feed cannot say (another manager's feed,
 * a cursor older than what is kept, too many rows for one answer).
 */
import { describe, expect, it } from 'vitest';
import { ChangeFeed, concernsHosts } from '../../src/manager/change-feed.js';

describe('change feed', () => {
  it('a reader with no cursor is told to re-read all, then hears only what changed after', () => {
    const feed = new ChangeFeed();
    feed.record([{ row: 'a', cols: ['files'] }]);
    const first = feed.since(undefined);
    expect(first).toMatchObject({ feed: feed.id, seq: 1, reset: true, rows: [] });

    expect(feed.since(first)).toEqual({ feed: feed.id, seq: 1, reset: false, rows: [] });
    feed.record([
      { row: 'b', cols: ['cq'] },
      { row: 'c', cols: ['*'] },
    ]);
    feed.record([{ row: 'b', cols: ['files'] }]);
    const next = feed.since(first);
    expect(next.reset).toBe(false);
    expect(next.seq).toBe(3);
    expect(next.rows.sort()).toEqual(['b', 'c']);
    expect(feed.since(next).rows).toEqual([]);
  });

  it("leaves out the rows only the asking server changed, not others' changes to the same rows", () => {
    const feed = new ChangeFeed();
    const cursor = feed.head();
    feed.record([{ row: 'a', cols: ['files'], origin: 'ts-1' }]);
    feed.record([{ row: 'b', cols: ['files'], origin: 'ts-2' }]);
    feed.record([{ row: 'a', cols: ['cq'] }]);
    expect(feed.since(cursor, 'ts-1').rows.sort()).toEqual(['a', 'b']);
    feed.record([{ row: 'c', cols: ['files'], origin: 'ts-1' }]);
    expect(feed.since({ feed: feed.id, seq: 3 }, 'ts-1').rows).toEqual([]);
    expect(feed.since({ feed: feed.id, seq: 3 }, 'ts-2').rows).toEqual(['c']);
  });

  it("a cursor of another manager's feed, or from its future, is a reset", () => {
    const feed = new ChangeFeed();
    feed.record([{ row: 'a', cols: ['files'] }]);
    const other = new ChangeFeed();
    expect(feed.since(other.head()).reset).toBe(true);
    expect(feed.since({ feed: feed.id, seq: 7 })).toMatchObject({ reset: true, seq: 1 });
  });

  it('a cursor older than what the ring keeps is a reset; one at the edge is not', () => {
    const feed = new ChangeFeed(4);
    const start = feed.head();
    for (const row of ['a', 'b', 'c']) feed.record([{ row, cols: ['files'] }]);
    const atB = { feed: feed.id, seq: 2 };
    // Batch 4 is one row more than the ring holds: a (batch 1) is pushed out.
    feed.record([
      { row: 'd', cols: ['files'] },
      { row: 'e', cols: ['files'] },
    ]);
    expect(feed.since(start).reset).toBe(true);
    expect(feed.since(atB).rows.sort()).toEqual(['c', 'd', 'e']);
    // Batch 5 pushes out b: a reader at batch 2 had seen it, so it still misses nothing.
    feed.record([{ row: 'f', cols: ['files'] }]);
    const later = feed.since(atB);
    expect(later.reset).toBe(false);
    expect(later.rows.sort()).toEqual(['c', 'd', 'e', 'f']);
    expect(feed.since({ feed: feed.id, seq: 1 }).reset).toBe(true);
  });

  it('more rows than one answer holds is a reset, with the head as the new cursor', () => {
    const feed = new ChangeFeed(100, 3);
    const cursor = feed.head();
    feed.record(['a', 'b', 'c'].map((row) => ({ row, cols: ['files'] })));
    expect(feed.since(cursor).reset).toBe(false);
    feed.record([{ row: 'd', cols: ['files'] }]);
    expect(feed.since(cursor)).toEqual({ feed: feed.id, seq: 2, reset: true, rows: [] });
  });

  it('keeps no change of placement alone, so hosting many tablets resets no reader', () => {
    const row = '0001;61';
    expect(concernsHosts({ row, cols: ['future'] })).toBe(false);
    expect(concernsHosts({ row, cols: ['loc', 'future'], origin: 'ts-1' })).toBe(false);
    expect(concernsHosts({ row: '~cq:q:000', cols: ['x'] })).toBe(false);
    // The manager taking a location away: the server named there must drop the tablet.
    expect(concernsHosts({ row, cols: ['loc', 'future'] })).toBe(true);
    expect(concernsHosts({ row, cols: ['loc', 'ver'], origin: 'ts-1' })).toBe(true);
    expect(concernsHosts({ row, cols: ['*'], origin: 'ts-1' })).toBe(true);

    const feed = new ChangeFeed(100, 10);
    const cursor = feed.head();
    for (let i = 0; i < 1_000; i++) {
      const tablet = `0001;${i.toString(16).padStart(4, '0')}`;
      feed.record([{ row: tablet, cols: ['future'] }]);
      feed.record([{ row: tablet, cols: ['loc', 'future'], origin: 'ts-2' }]);
    }
    feed.record([{ row: '0001;0005', cols: ['compact:U1'] }]);
    expect(feed.since(cursor, 'ts-1')).toMatchObject({ reset: false, rows: ['0001;0005'] });
  });
});
