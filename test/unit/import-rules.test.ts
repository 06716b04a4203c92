/**
 * What a bulk import does to one tablet (src/tserver/import-rules.ts), the rows it leaves to apply
 * (rowsOutside), how long its id is remembered (expiredIngests) and the full read of a file it trusts
 * (verifyRFile). Real processes import in test/cluster/bulk-import.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { IMPORT_DEDUPE_MS, INGEST_DEDUPE_MS, expiredIngests } from '../../src/meta/ingest-ids.js';
import { tabletRow } from '../../src/meta/keys.js';
import { rowsOutside, tabletRows } from '../../src/meta/rows.js';
import { parseTablet, type Reservation } from '../../src/meta/tablet.js';
import { MemoryObjectStore, makeEntry, verifyRFile, writeRFile } from '../../src/storage/index.js';
import { decideImport, IMPORT_CLOCK_AHEAD_MS, type ImportedFile } from '../../src/tserver/import-rules.js';

const hex = (s: string) => Buffer.from(s).toString('hex');
const NOW = 1_800_000_000_000;

/** The tablet (b, m] of table 0001. */
function tablet() {
  return parseTablet(tabletRow('0001', Buffer.from('m')), new Map([['prev', JSON.stringify(hex('b'))]]));
}

/** A file of rows a..z in 26 blocks of 100 bytes. */
function file(name: string, oldestTs = 10, newestTs = 20): ImportedFile {
  const rows = 'abcdefghijklmnopqrstuvwxyz'.split('');
  return {
    name,
    entries: 2_600,
    size: 2_600,
    oldestTs,
    newestTs,
    profile: {
      firstRow: Buffer.from('a'),
      lastRow: Buffer.from('z'),
      blocks: rows.map((r) => ({ row: Buffer.from(r), bytes: 100 })),
    },
  };
}

function dropping(nowMs: number): Reservation {
  return {
    compactor: '/c/1',
    queueId: '0001',
    inputs: ['f'],
    output: 'o',
    kind: 'system',
    attempt: 0,
    reservedAt: nowMs,
    allFiles: true,
    settings: { versions: 1, nowMs, filters: [], dropDeletes: true },
  };
}

describe('bulk import rules', () => {
  it('adds the share of each file in the tablet, records the import and moves the clock', () => {
    const meta = tablet();
    meta.time = 5;
    const d = decideImport(
      meta,
      'x',
      undefined,
      [file('B1'), file('B2', 1, NOW + 10 * IMPORT_CLOCK_AHEAD_MS)],
      NOW,
    );
    expect(d.kind).toBe('apply');
    if (d.kind !== 'apply') return;
    expect([...d.files.keys()]).toEqual(['B1', 'B2']);
    // Rows (b, m] of a..z: about 11 of the 26 blocks.
    const share = d.files.get('B1')!;
    expect(share.size).toBeGreaterThan(900);
    expect(share.size).toBeLessThan(1_300);
    expect(share.fence).toBeUndefined();
    expect(d.record).toEqual({ at: NOW });
    // B2's newest timestamp is far ahead of the clock: it does not move the tablet's.
    expect(d.time).toBe(20);
  });

  it('applies an import once, and only in the rows a merged tablet had not applied', () => {
    const meta = tablet();
    meta.ingests.set('import.x', { at: NOW - 1_000 });
    expect(decideImport(meta, 'x', undefined, [file('B1')], NOW).kind).toBe('duplicate');
    // A merge of (b, f] that applied it with (f, m] that had not.
    meta.ingests.set('import.x', { at: NOW - 1_000, rows: [tabletRows(Buffer.from('b'), Buffer.from('f'))] });
    const d = decideImport(meta, 'x', undefined, [file('B3')], NOW);
    if (d.kind !== 'apply') throw new Error(d.kind);
    const rest = tabletRows(Buffer.from('f'), Buffer.from('m'));
    expect(d.files.get('B3')!.fence).toEqual([rest]);
    expect(d.record.rows).toEqual([tabletRows(Buffer.from('b'), Buffer.from('f')), rest]);
    // A file wholly outside the rows left is not added; the rows are recorded all the same.
    const outside = {
      ...file('B4'),
      profile: {
        firstRow: Buffer.from('c'),
        lastRow: Buffer.from('d'),
        blocks: [{ row: Buffer.from('d'), bytes: 9 }],
      },
    };
    const o = decideImport(meta, 'x', undefined, [outside], NOW);
    if (o.kind !== 'apply') throw new Error(o.kind);
    expect(o.files.size).toBe(0);
  });

  it('a merged tablet given two pieces of one file reads it in both (found by the chaos run: the second replaced the first)', () => {
    const meta = tablet();
    const [bf, fm] = [
      tabletRows(Buffer.from('b'), Buffer.from('f')),
      tabletRows(Buffer.from('f'), Buffer.from('m')),
    ];
    // The client's pieces for the two tablets it knew, (b, f] and (f, m], both reaching the merged (b, m].
    const one = decideImport(meta, 'x', bf, [file('B5')], NOW);
    if (one.kind !== 'apply') throw new Error(one.kind);
    expect(one.files.get('B5')!.fence).toEqual([bf]);
    for (const [name, f] of one.files) meta.files.set(name, f);
    meta.ingests.set('import.x', one.record);
    const two = decideImport(meta, 'x', fm, [file('B5')], NOW);
    if (two.kind !== 'apply') throw new Error(two.kind);
    // Every row of the tablet now: no fence, and the shares added up.
    const both = two.files.get('B5')!;
    expect(both.fence).toBeUndefined();
    expect(both.size).toBeGreaterThan(one.files.get('B5')!.size);
    for (const [name, f] of two.files) meta.files.set(name, f);
    meta.ingests.set('import.x', two.record);
    expect(decideImport(meta, 'x', undefined, [file('B5')], NOW).kind).toBe('duplicate');
  });

  it('waits for a running compaction that drops deletes reserved at or after the oldest entry', () => {
    const meta = tablet();
    meta.reservations.set('E1', dropping(15));
    expect(decideImport(meta, 'x', undefined, [file('B1', 10)], NOW)).toEqual({
      kind: 'wait',
      ecids: ['E1'],
    });
    // Every entry newer than the job's reference time: no marker it drops can hide one.
    expect(decideImport(meta, 'x', undefined, [file('B1', 16)], NOW).kind).toBe('apply');
    // A job that keeps its markers does not hold an import back.
    meta.reservations.set('E1', {
      ...dropping(15),
      settings: { ...dropping(15).settings, dropDeletes: false },
    });
    expect(decideImport(meta, 'x', undefined, [file('B1', 10)], NOW).kind).toBe('apply');
  });
});

describe('rowsOutside', () => {
  it('leaves the rows of a range in none of the holes', () => {
    const r = { start: '10', end: '90' };
    expect(rowsOutside(r, [])).toEqual([r]);
    expect(rowsOutside(r, [{ start: '20', end: '30' }, { start: '50' }])).toEqual([
      { start: '10', end: '20' },
      { start: '30', end: '50' },
    ]);
    expect(rowsOutside(r, [{ end: '40' }])).toEqual([{ start: '40', end: '90' }]);
    expect(rowsOutside(r, [{}])).toEqual([]);
    expect(rowsOutside({}, [{ start: '40', end: '50' }])).toEqual([{ end: '40' }, { start: '50' }]);
  });
});

describe('import ids', () => {
  it('are remembered for a week, beside batches remembered for 15 minutes', () => {
    const ingests = new Map([
      ['import.old', { at: NOW - IMPORT_DEDUPE_MS - 1 }],
      ['import.young', { at: NOW - INGEST_DEDUPE_MS - 5 }],
      ['batch.old', { at: NOW - INGEST_DEDUPE_MS - 1 }],
      ['batch.young', { at: NOW - 1 }],
    ]);
    expect(expiredIngests(ingests, NOW)).toEqual(['import.old', 'batch.old']);
  });
});

describe('verifyRFile', () => {
  it('reads what a file holds, and refuses one with a duplicate entry', async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'f.rf', [
      makeEntry('a', '', '', 7, 'x'),
      makeEntry('b', '', '', 9, '', true),
      makeEntry('c', '', '', 3, 'z'),
    ]);
    const facts = await verifyRFile(store, 'f.rf');
    expect(facts).toMatchObject({ entries: 3, deletes: 1, oldestTs: 3, newestTs: 9 });
    expect(facts.firstRow?.toString()).toBe('a');
    expect(facts.lastRow?.toString()).toBe('c');
    await writeRFile(store, 'dup.rf', [makeEntry('a', '', '', 7, 'x'), makeEntry('a', '', '', 7, 'x')]);
    await expect(verifyRFile(store, 'dup.rf')).rejects.toThrow(/entry 2 is out of order \(a duplicate/);
  });
});
