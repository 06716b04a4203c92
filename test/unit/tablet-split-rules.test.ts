/**
 * Tablet splits and holds, alone (src/tserver/tablet-split-rules.ts, hold-rules.ts): where a tablet
 * splits, what each daughter gets, and what a daughter does with its share in a compaction that ran
 * across the split. Real tablet servers split tablets in test/cluster/tablet-split.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { holdCol } from '../../src/meta/holds.js';
import { ingestRow } from '../../src/meta/ingest-ids.js';
import { tabletRow } from '../../src/meta/keys.js';
import type { Outcome } from '../../src/meta/outcomes.js';
import { tabletRows } from '../../src/meta/rows.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { parseTablet, type Reservation, type TabletMeta } from '../../src/meta/tablet.js';
import type { Cell } from '../../src/meta/types.js';
import { planTablet } from '../../src/queue/tablet-plan.js';
import type { FileProfile } from '../../src/storage/index.js';
import { decideHold } from '../../src/tserver/hold-rules.js';
import {
  decideTabletSplit,
  fileShares,
  middleRow,
  usableSplitRows,
} from '../../src/tserver/tablet-split-rules.js';

const b = (s: string) => Buffer.from(s);
const ME = { server: 'ts:1', session: '00000000000000aa' };
const TABLE = '0001';
const ECID = '01J0000000000000000000000A';
const CONFIG = tableConfigSchema.parse({ queues: [{ queue: 'q' }] });

/** Blocks of 100 bytes ending at each of `rows`. */
function profile(rows: string[]): FileProfile {
  return {
    firstRow: b(rows[0]!),
    lastRow: b(rows.at(-1)!),
    blocks: rows.map((r) => ({ row: b(r), bytes: 100 })),
  };
}

/** Tablet (c, x] of table 0001 with files f1 (rows d..w) and f2 (rows d..f), 1000 bytes each. */
function parent(): TabletMeta {
  const meta = parseTablet(
    tabletRow(TABLE, b('x')),
    new Map([['prev', JSON.stringify(b('c').toString('hex'))]]),
  );
  meta.loc = ME;
  meta.time = 77;
  meta.files.set('f1', { size: 1000, entries: 100 });
  meta.files.set('f2', { size: 1000, entries: 100 });
  meta.ingests.set('batch.0', { at: 5 });
  return meta;
}
const PROFILES = new Map([
  ['f1', profile(['d', 'f', 'h', 'k', 'n', 'q', 's', 'w'])],
  ['f2', profile(['d', 'e', 'f'])],
]);

function reservation(inputs: string[], extra: Partial<Reservation> = {}): Reservation {
  return {
    compactor: '/exc/compactors/q001/c-1',
    queueId: 'q001',
    inputs,
    output: 'out.rf',
    kind: 'system',
    attempt: 0,
    reservedAt: 1,
    allFiles: true,
    clip: tabletRows(b('c'), b('x')),
    settings: { versions: 1, nowMs: 90, filters: [], dropDeletes: true },
    ...extra,
  };
}

/** The cells of a row as a mutation writes them, read back the way every process reads a tablet. */
function readBack(row: string, puts: Cell[]): TabletMeta {
  const cols = new Map(puts.filter((p) => p.row === row).map((p) => [p.col, p.value]));
  for (const p of puts) if (p.row === ingestRow(row)) cols.set(`ingest:${p.col}`, p.value);
  return parseTablet(row, cols);
}

describe('tablet split - where', () => {
  it('only rows strictly inside the tablet, each once, ascending', () => {
    const t = parent();
    expect(usableSplitRows(t, [b('x'), b('c'), b('m'), b('e'), b('m'), b('zz'), b('a')])).toEqual([
      b('e'),
      b('m'),
    ]);
  });

  it('by itself: the row nearest the middle of its bytes, within its rows', () => {
    const t = parent();
    // f1's 800 bytes spread over d..w, f2's 300 over d..f: 500 bytes are at or before f, 600 before h,
    // 650 before g (half of f1's block f..h); a fourth block of f2 ending at g moves the middle there.
    const f2 = profile(['d', 'e', 'f', 'g']);
    expect(middleRow(t, [PROFILES.get('f1')!, f2])?.toString()).toBe('g');
    // A tablet of one row has nowhere to split.
    expect(middleRow(t, [profile(['k', 'k', 'k'])])).toBeUndefined();
  });

  it('by itself: small files of one block each count over their rows, not at their last row', () => {
    // Tablet (c, x]: one file of eight blocks over d..w, and ten one-block files over d..w — counted at
    // their last row, all of their bytes would sit at w and the middle would be there.
    const small = Array.from({ length: 10 }, () => ({
      firstRow: b('d'),
      lastRow: b('w'),
      blocks: [{ row: b('w'), bytes: 300 }],
    }));
    const row = middleRow(parent(), [PROFILES.get('f1')!, ...small])!.toString();
    expect(['k', 'n']).toContain(row);
    // Only one-block files over the same rows: no row of their indexes is near the middle, so a row
    // between is made, short, with about half of the bytes on each side.
    const only = middleRow(parent(), small)!;
    expect(only.compare(b('d'))).toBeGreaterThan(0);
    expect(only.compare(b('w'))).toBeLessThan(0);
    expect(only.length).toBe(1);
    expect(only.toString()).toBe('m');
  });

  it("a file's share of each daughter follows its blocks; none where it holds none of their rows", () => {
    const ranges = [
      { prev: b('c'), end: b('k') },
      { prev: b('k'), end: b('x') },
    ];
    expect(fileShares(PROFILES.get('f1'), ranges)).toEqual([0.5, 0.5]);
    expect(fileShares(PROFILES.get('f2'), ranges)).toEqual([1, null]);
    expect(fileShares(undefined, ranges)).toEqual([0.5, 0.5]);
  });
});

describe('tablet split - what each daughter gets', () => {
  it('files shared with estimates, the reservation stays, the other daughter holds it', () => {
    const t = parent();
    t.reservations.set(ECID, reservation(['f1', 'f2']));
    t.userCompactions.set('U1', { requestedAt: 3, filters: [] });
    const { daughters, change } = decideTabletSplit(t, [b('k')], PROFILES, { me: ME, now: 100 });
    expect(daughters).toHaveLength(1);
    const low = daughters[0]!;
    expect(low.row).toBe(tabletRow(TABLE, b('k')));
    expect(low.prevEndRow?.toString()).toBe('c');
    // f1 is shared: its counts are estimated (half its bytes are in each daughter's rows); f2 is whole.
    expect([...low.files]).toEqual([
      ['f1', { size: 500, entries: 50, estimated: true }],
      ['f2', { size: 1000, entries: 100 }],
    ]);
    // The low daughter holds its share in the running compaction, with the request and the ingest ids.
    expect(low.reservations.size).toBe(0);
    expect(low.holds.get(ECID)).toMatchObject({
      tablet: t.row,
      inputs: ['f1', 'f2'],
      output: 'out.rf',
      share: 0.75,
    });
    expect(low.userCompactions.has('U1')).toBe(true);
    expect(low.ingests.get('batch.0')).toEqual({ at: 5 });
    // Its row, read back from the mutation, is the daughter.
    const back = readBack(low.row, change.puts);
    expect(back.loc).toEqual(ME);
    expect(back.time).toBe(77);
    expect([...back.files]).toEqual([...low.files]);
    expect([...back.holds]).toEqual([...low.holds]);
    expect([...back.ingests]).toEqual([...low.ingests]);
    // Written only where no row is, and only while the request is still the tablet's.
    expect(change.conditions).toContainEqual({ op: 'noColumnWithPrefix', row: low.row, prefix: '' });
    expect(change.conditions).toContainEqual({ op: 'present', row: t.row, col: 'compact:U1' });
    // And while the manager asked for no request the copy has not seen: a request written to the row just
    // before the split would reach no new daughter (found by chaos: a daughter kept rows a filter dropped).
    expect(change.conditions).toContainEqual({ op: 'absent', row: t.row, col: 'requests' });
    t.requests = 'U1';
    const seen = decideTabletSplit(t, [b('k')], PROFILES, { me: ME, now: 100 });
    expect(seen.change.conditions).toContainEqual({ op: 'equals', row: t.row, col: 'requests', value: 'U1' });
    expect(readBack(seen.daughters[0]!.row, seen.change.puts).requests).toBe('U1');
    delete t.requests;
    expect(change.deleteRows).toEqual([ingestRow(low.row)]);

    // The tablet becomes the high daughter: its reservation and its input f2 stay, though f2 holds none of
    // its rows any more (the commit replaces exactly the inputs it was reserved on).
    change.apply(t);
    expect(t.prevEndRow?.toString()).toBe('k');
    expect(t.reservations.has(ECID)).toBe(true);
    expect([...t.files.keys()]).toEqual(['f1', 'f2']);
    expect(t.files.get('f1')).toEqual({ size: 500, entries: 50, estimated: true });
    // Held files are no daughter's to compact meanwhile.
    expect(planTablet(low, CONFIG).filter((j) => j.kind === 'system')).toEqual([]);
  });

  it('a file of none of a daughter’s rows is not hers; a sub-job of a split job leaves her no hold', () => {
    const t = parent();
    t.reservations.set(ECID, reservation(['f1'], { split: { id: 'S', index: 0, of: 2, end: '6b' } }));
    t.splits.set('S', {
      inputs: ['f1'],
      kind: 'system',
      allFiles: false,
      settings: { versions: 1, nowMs: 90, filters: [], dropDeletes: false },
      bounds: ['6b'],
      done: [null, null],
      createdAt: 1,
    });
    const { daughters, change } = decideTabletSplit(t, [b('g')], PROFILES, { me: ME, now: 100 });
    const low = daughters[0]!;
    expect(low.holds.size).toBe(0);
    change.apply(t);
    // f2 (rows d..f) is all below g: the high daughter drops it.
    expect([...t.files.keys()]).toEqual(['f1']);
    expect(t.splits.has('S')).toBe(true);
    expect(change.deletes).toContainEqual({ row: t.row, col: 'file:f2' });
  });

  it('several rows at once: every daughter but the last holds the reservation', () => {
    const t = parent();
    t.reservations.set(ECID, reservation(['f1']));
    const { daughters } = decideTabletSplit(t, [b('h'), b('q')], PROFILES, { me: ME, now: 100 });
    expect(daughters.map((d) => d.endRow?.toString())).toEqual(['h', 'q']);
    expect(daughters.map((d) => d.prevEndRow?.toString())).toEqual(['c', 'h']);
    expect(daughters.every((d) => d.holds.has(ECID))).toBe(true);
  });
});

describe('holds', () => {
  const committed = (extra: Partial<Outcome> = {}): Outcome => ({
    outcome: 'committed',
    tablet: tabletRow(TABLE, b('x')),
    queueId: 'q001',
    compactor: '/c',
    kind: 'system',
    inputs: 2,
    entries: 40,
    inputBytes: 2000,
    outputBytes: 800,
    reservedAt: 1,
    server: 'ts:1',
    at: 120,
    ...extra,
  });
  function holding(extra: Partial<TabletMeta['holds'] extends Map<string, infer H> ? H : never> = {}) {
    const t = parent();
    t.reservations.set(ECID, reservation(['f1', 'f2']));
    const low = decideTabletSplit(t, [b('k')], PROFILES, { me: ME, now: 100 }).daughters[0]!;
    low.holds.set(ECID, { ...low.holds.get(ECID)!, ...extra });
    return low;
  }

  it('committed: the output takes the inputs’ place, with its share of the bytes; the inputs are marked', () => {
    const low = holding();
    const d = decideHold(low, ECID, low.holds.get(ECID)!, { outcome: committed(), reserved: false }, 200);
    expect(d.kind).toBe('install');
    if (d.kind !== 'install') return;
    expect(d.change.conditions).toContainEqual({ op: 'present', row: low.row, col: holdCol(ECID) });
    expect(d.change.puts).toContainEqual({ row: '~del:f1', col: 'at', value: '200' });
    d.change.apply(low);
    expect([...low.files]).toEqual([['out.rf', { size: 600, entries: 30, estimated: true }]]);
    expect(low.holds.size).toBe(0);
    expect(low.time).toBe(90);
  });

  it('still reserved: wait; cancelled, or gone without an outcome: let go, and the files are hers again', () => {
    const low = holding();
    const h = low.holds.get(ECID)!;
    expect(decideHold(low, ECID, h, { reserved: true }, 200).kind).toBe('wait');
    const cancelled = decideHold(
      low,
      ECID,
      h,
      { outcome: committed({ outcome: 'cancelled', reason: 'compactor-gone' }), reserved: false },
      200,
    );
    expect(cancelled.kind).toBe('release');
    expect(decideHold(low, ECID, h, { reserved: false }, 200).kind).toBe('release');
    if (cancelled.kind !== 'release') return;
    cancelled.change.apply(low);
    expect(planTablet(low, CONFIG).some((j) => j.files.includes('f1'))).toBe(false); // ratio: 500 vs 1000
    expect(low.holds.size).toBe(0);
    expect([...low.files.keys()]).toEqual(['f1', 'f2']);
  });

  it('a user job installs only while a request of it is still hers, and satisfies it', () => {
    const low = holding({ kind: 'user', userCompactionIds: ['U1'] });
    low.userCompactions.set('U1', { requestedAt: 3, filters: [] });
    low.selection = { ids: ['U1'], files: ['f1', 'f2'], filters: [] };
    const outcome = committed({ kind: 'user', userCompactionIds: ['U1'] });
    const d = decideHold(low, ECID, low.holds.get(ECID)!, { outcome, reserved: false }, 200);
    expect(d.kind).toBe('install');
    if (d.kind !== 'install') return;
    expect(d.change.conditions).toContainEqual({ op: 'present', row: low.row, col: 'compact:U1' });
    d.change.apply(low);
    expect(low.userCompactions.size).toBe(0);
    expect(low.selection).toBeUndefined();
    // Cancelled here by an admin: the rewrite is not installed.
    const cancelledHere = holding({ kind: 'user', userCompactionIds: ['U1'] });
    expect(
      decideHold(cancelledHere, ECID, cancelledHere.holds.get(ECID)!, { outcome, reserved: false }, 200),
    ).toMatchObject({ kind: 'release' });
  });
});
