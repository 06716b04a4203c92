import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import { MetaStore } from '../../src/meta/store.js';
import { tempDir } from '../support/index.js';

describe('meta store', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;

  beforeEach(() => {
    dir = tempDir('meta');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  it('conditional mutation - applied whole when every condition holds', () => {
    expect(store.mutate({ puts: [{ row: 'a', col: 'x', value: '1' }] })).toEqual({ applied: true });
    const result = store.mutate({
      conditions: [
        { op: 'equals', row: 'a', col: 'x', value: '1' },
        { op: 'absent', row: 'b', col: 'y' },
      ],
      puts: [
        { row: 'a', col: 'x', value: '2' },
        { row: 'b', col: 'y', value: 'new' },
      ],
    });
    expect(result).toEqual({ applied: true });
    expect(store.get('a', 'x')).toBe('2');
    expect(store.get('b', 'y')).toBe('new');
  });

  it('conditional mutation - a mutation that lost a race changes nothing and says which condition failed', () => {
    store.mutate({
      puts: [
        { row: 'tablet', col: 'file:f1', value: '{}' },
        { row: 'tablet', col: 'loc', value: 'A' },
      ],
    });
    // Two writers read loc=A; the first moves it to B, the second's conditions are now stale.
    const first = store.mutate({
      conditions: [{ op: 'equals', row: 'tablet', col: 'loc', value: 'A' }],
      puts: [{ row: 'tablet', col: 'loc', value: 'B' }],
    });
    const second = store.mutate({
      conditions: [
        { op: 'present', row: 'tablet', col: 'file:f1' },
        { op: 'equals', row: 'tablet', col: 'loc', value: 'A' },
      ],
      puts: [{ row: 'tablet', col: 'file:f2', value: '{}' }],
      deletes: [{ row: 'tablet', col: 'file:f1' }],
      deleteRows: ['other'],
    });
    expect(first).toEqual({ applied: true });
    expect(second).toEqual({
      applied: false,
      failed: { index: 1, condition: { op: 'equals', row: 'tablet', col: 'loc', value: 'A' }, actual: 'B' },
    });
    expect([...store.row('tablet').keys()]).toEqual(['file:f1', 'loc']);
  });

  it('batch - mutations see the effects of earlier ones in the same batch', () => {
    const results = store.applyBatch([
      { conditions: [{ op: 'absent', row: 'r', col: 'c' }], puts: [{ row: 'r', col: 'c', value: 'first' }] },
      { conditions: [{ op: 'absent', row: 'r', col: 'c' }], puts: [{ row: 'r', col: 'c', value: 'second' }] },
      { conditions: [{ op: 'equals', row: 'r', col: 'c', value: 'first' }], deleteRows: ['r'] },
    ]);
    expect(results.map((r) => r.applied)).toEqual([true, false, true]);
    expect(store.row('r').size).toBe(0);
  });

  it('noColumnWithPrefix - holds only while no column of the row has the prefix', () => {
    store.mutate({ puts: [{ row: 't', col: 'file:a', value: '' }] });
    const cond = { op: 'noColumnWithPrefix' as const, row: 't', prefix: 'ecomp:' };
    expect(
      store.mutate({ conditions: [cond], puts: [{ row: 't', col: 'ecomp:1', value: '' }] }).applied,
    ).toBe(true);
    const again = store.mutate({ conditions: [cond], puts: [{ row: 't', col: 'ecomp:2', value: '' }] });
    expect(again).toMatchObject({ applied: false, failed: { actual: 'ecomp:1' } });
  });

  it('scan - key order, bounds, prefixes, column prefixes and resumable pages', () => {
    const rows = ['b', 'a', 'ab', 'a~', 'c', 'aa'];
    store.applyBatch(
      rows.map((row) => ({
        puts: [
          { row, col: 'k2', value: row },
          { row, col: 'k1', value: row },
        ],
      })),
    );

    const all = store.scan({ limit: 100 }).cells.map((c) => `${c.row}/${c.col}`);
    expect(all).toEqual([
      'a/k1',
      'a/k2',
      'aa/k1',
      'aa/k2',
      'ab/k1',
      'ab/k2',
      'a~/k1',
      'a~/k2',
      'b/k1',
      'b/k2',
      'c/k1',
      'c/k2',
    ]);
    expect(store.scan({ prefix: 'a', colPrefix: 'k2' }).cells.map((c) => c.row)).toEqual([
      'a',
      'aa',
      'ab',
      'a~',
    ]);
    expect(store.scan({ start: 'aa', end: 'b' }).cells.map((c) => c.row)).toEqual([
      'aa',
      'aa',
      'ab',
      'ab',
      'a~',
      'a~',
    ]);

    const seen: string[] = [];
    let page = store.scan({ limit: 5 });
    seen.push(...page.cells.map((c) => `${c.row}/${c.col}`));
    while (page.next) {
      page = store.scan({ limit: 5, after: page.next });
      seen.push(...page.cells.map((c) => `${c.row}/${c.col}`));
    }
    expect(seen).toEqual(all);
  });

  it('scan - scanAll follows every page, and scanRows gathers rows split across pages whole', () => {
    for (const row of ['a', 'b', 'c']) {
      store.mutate({ puts: ['k1', 'k2', 'k3'].map((col) => ({ row, col, value: `${row}${col}` })) });
    }
    expect([...store.scanAll({ start: 'a', end: 'c', limit: 2 })].map((c) => c.value)).toEqual([
      'ak1',
      'ak2',
      'ak3',
      'bk1',
      'bk2',
      'bk3',
    ]);
    expect([...store.scanRows({ limit: 2 })]).toEqual(
      ['a', 'b', 'c'].map((row) => ({
        row,
        cols: new Map(['k1', 'k2', 'k3'].map((col) => [col, `${row}${col}`])),
      })),
    );
  });

  it('snapshot - reads inside it do not see what another connection commits meanwhile', () => {
    store.mutate({ puts: [{ row: 't1', col: 'file:a', value: '{}' }] });
    // The manager writes through another connection (its writer thread); this one stands for it.
    const writer = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    try {
      const seen = store.snapshot(() => {
        const before = [...store.scanAll({})].map((c) => c.row);
        writer.mutate({ puts: [{ row: '~cq:t1', col: 'tablet', value: 't1' }] });
        return [before, [...store.scanAll({})].map((c) => c.row)];
      });
      expect(seen).toEqual([['t1'], ['t1']]);
      expect([...store.scanAll({})].map((c) => c.row)).toEqual(['t1', '~cq:t1']);
    } finally {
      writer.close();
    }
  });

  it('durability - what was applied is there after reopening the file', () => {
    store.mutate({ puts: [{ row: 'x', col: 'y', value: 'z' }] });
    store.close();
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    expect(store.get('x', 'y')).toBe('z');
  });

  it('fencing - a store handle from an older manager epoch can no longer write', () => {
    const older = store;
    older.takeOver();
    const newer = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    try {
      newer.takeOver();
      expect(() => older.mutate({ puts: [{ row: 'z', col: 'z', value: 'zombie' }] })).toThrow(/fenced/);
      expect(newer.mutate({ puts: [{ row: 'z', col: 'z', value: 'ok' }] })).toEqual({ applied: true });
      expect(newer.get('z', 'z')).toBe('ok');
    } finally {
      newer.close();
    }
  });

  it('fencing - a stored epoch that is not a whole number is refused by name, never read as NaN', () => {
    const thrown = (call: () => unknown): ExcError => {
      try {
        call();
      } catch (err) {
        return err as ExcError;
      }
      throw new Error('expected a throw');
    };
    for (const mangled of ['x', '1.5', '', '-1', '1e3', ' 2']) {
      store.mutate({ puts: [{ row: '~instance', col: 'managerEpoch', value: mangled }] });
      for (const err of [thrown(() => store.takeOver()), thrown(() => store.storedEpoch())]) {
        expect(err.code, mangled).toBe('CONFIG_INVALID');
        expect(err.message).toMatch(/~instance, column managerEpoch.* not a whole number/);
      }
      expect(store.get('~instance', 'managerEpoch')).toBe(mangled);
    }
  });

  it('validation - rows must be printable ASCII and mutations well formed', () => {
    expect(() => store.mutate({ puts: [{ row: 'bad\u0001', col: 'c', value: 'v' }] })).toThrow(
      /printable ASCII/,
    );
    expect(() => store.mutate({ puts: [{ row: '', col: 'c', value: 'v' }] })).toThrow();
    expect(store.scan({}).cells).toEqual([]);
  });
});
