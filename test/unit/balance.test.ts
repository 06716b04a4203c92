/**
 * Balancing, alone (src/manager/balance.ts): drained servers give up everything, each table's tablets
 * end within one of each other per server, moves under way count for their destination, and no more than
 * `maxMoves` are planned. Real tablet servers move tablets in test/cluster/balance.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  affectsPlacement,
  backstopAfter,
  pinRows,
  planMoves,
  type PlacedTablet,
} from '../../src/manager/balance.js';
import { TSERVER_PREFIX } from '../../src/manager/drains.js';
import { TABLE_PREFIX } from '../../src/meta/keys.js';

const tablet = (row: string, server: string, extra: Partial<PlacedTablet> = {}): PlacedTablet => ({
  row,
  tableId: '0001',
  server,
  bytes: 100,
  reservations: 0,
  ...extra,
});

/** Where every tablet is once `moves` are made. */
function after(tablets: PlacedTablet[], moves: { tablet: string; to: string }[]): Map<string, string> {
  const where = new Map(tablets.map((t) => [t.row, t.server]));
  for (const m of moves) where.set(m.tablet, m.to);
  return where;
}

describe('balancing', () => {
  it('a server that joins gets its share: within one tablet of the others', () => {
    const tablets = Array.from({ length: 9 }, (_, i) => tablet(`t${i}`, ['a', 'b', 'c'][i % 3]!));
    const moves = planMoves({
      tablets,
      moving: [],
      eligible: ['a', 'b', 'c', 'd'],
      drained: new Set(),
      maxMoves: 10,
    });
    const counts = new Map<string, number>();
    for (const s of after(tablets, moves).values()) counts.set(s, (counts.get(s) ?? 0) + 1);
    expect(counts.get('d')).toBe(2);
    expect(Math.max(...counts.values()) - Math.min(...counts.values())).toBeLessThanOrEqual(1);
    expect(moves.every((m) => m.to === 'd')).toBe(true);
  });

  it('a drained server gives up every tablet, quietest first; moves under way count', () => {
    const tablets = [tablet('t1', 'a', { reservations: 2 }), tablet('t2', 'a'), tablet('t3', 'b')];
    const moves = planMoves({
      tablets,
      moving: [{ tableId: '0001', bytes: 100, to: 'c' }],
      eligible: ['b', 'c'],
      drained: new Set(['a']),
      maxMoves: 1,
    });
    expect(moves).toEqual([{ tablet: 't2', from: 'a', to: 'b' }]);
  });

  it('the tablet that evens out the bytes moves', () => {
    const tablets = [
      tablet('t1', 'a', { bytes: 10 }),
      tablet('t2', 'a', { bytes: 500 }),
      tablet('t3', 'a', { bytes: 90 }),
    ];
    const moves = planMoves({ tablets, moving: [], eligible: ['a', 'b'], drained: new Set(), maxMoves: 5 });
    expect(moves).toEqual([{ tablet: 't2', from: 'a', to: 'b' }]);
  });

  it('any placement: each table ends within one tablet per server, drained servers empty, at most maxMoves', () => {
    const servers = ['a', 'b', 'c', 'd'];
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            server: fc.constantFrom(...servers),
            table: fc.constantFrom('0001', '0002'),
            bytes: fc.nat(1000),
          }),
          { maxLength: 40 },
        ),
        fc.subarray(servers, { minLength: 0, maxLength: 3 }),
        (placed, drainedList) => {
          const tablets = placed.map((p, i) =>
            tablet(`t${i}`, p.server, { tableId: p.table, bytes: p.bytes }),
          );
          const drained = new Set(drainedList);
          const eligible = servers.filter((s) => !drained.has(s));
          const moves = planMoves({ tablets, moving: [], eligible, drained, maxMoves: 1000 });
          const where = after(tablets, moves);
          for (const s of drained) expect([...where.values()]).not.toContain(s);
          for (const table of ['0001', '0002']) {
            const counts = new Map(eligible.map((s) => [s, 0]));
            for (const t of tablets)
              if (t.tableId === table) counts.set(where.get(t.row)!, counts.get(where.get(t.row)!)! + 1);
            expect(Math.max(...counts.values()) - Math.min(...counts.values())).toBeLessThanOrEqual(1);
          }
          const few = planMoves({ tablets, moving: [], eligible, drained, maxMoves: 2 });
          expect(few.length).toBeLessThanOrEqual(2);
        },
      ),
    );
  });

  it('a pass follows the changes of placement, tablets, tables and drains, not those of files or queues', () => {
    expect(affectsPlacement({ row: '0001;m', cols: ['loc'] })).toBe(true);
    expect(affectsPlacement({ row: '0001;m', cols: ['file:F1', 'future'] })).toBe(true);
    expect(affectsPlacement({ row: '0001;m', cols: ['prev'] })).toBe(true);
    expect(affectsPlacement({ row: '0001;m', cols: ['*'] })).toBe(true);
    expect(affectsPlacement({ row: `${TABLE_PREFIX}0001`, cols: ['state'] })).toBe(true);
    expect(affectsPlacement({ row: `${TSERVER_PREFIX}ts-1`, cols: ['drain'] })).toBe(true);
    expect(affectsPlacement({ row: '0001;m', cols: ['file:F1', 'ecomp:E1', 'queued:E1', 'ver'] })).toBe(
      false,
    );
  });

  it('a whole row deleted counts only when it is a tablet', () => {
    // A reservation deletes its queue entry whole, the manager trims outcome rows whole: neither may cost
    // a pass that reads every tablet.
    expect(affectsPlacement({ row: '~cq:q:0:5:0001;m', cols: ['*'] })).toBe(false);
    expect(affectsPlacement({ row: '~outcome:0001;m:E1', cols: ['*'] })).toBe(false);
    expect(affectsPlacement({ row: '~ingest:0001;m', cols: ['*'] })).toBe(false);
    expect(affectsPlacement({ row: '0001<', cols: ['*'] })).toBe(true);
  });
});

describe('the assignment backstop and pins', () => {
  it('passes every minute, or as rarely as reading every tablet at 500 a second takes', () => {
    expect(backstopAfter(60_000, 1_000)).toBe(60_000);
    expect(backstopAfter(60_000, 30_000)).toBe(60_000);
    expect(backstopAfter(60_000, 100_000)).toBe(200_000);
    expect(backstopAfter(600_000, 100_000)).toBe(600_000);
  });

  it('keeps a row pinned while any pin on it holds; a release counts once', () => {
    const pinned = new Map<string, number>();
    const first = pinRows(pinned, ['a', 'b']);
    const second = pinRows(pinned, ['b']);
    first();
    first();
    expect([...pinned]).toEqual([['b', 1]]);
    second();
    expect(pinned.size).toBe(0);
  });
});
