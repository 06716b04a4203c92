import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import {
  FILTERS,
  iteratorStack,
  makeEntry,
  validateFilters,
  validateIteratorSettings,
  type Entry,
  type IteratorSettings,
} from '../../src/storage/index.js';
import { collect, each } from '../support/entries.js';
import { show } from './model.js';

async function run(sources: Entry[][], settings: Partial<IteratorSettings>): Promise<string[]> {
  const full: IteratorSettings = { versions: 1, nowMs: 100, filters: [], dropDeletes: true, ...settings };
  return show(await collect(iteratorStack(sources.map(each), full)));
}

const put = (row: string, ts: number, value = `v${ts}`, family = 'f', qualifier = 'q'): Entry =>
  makeEntry(row, family, qualifier, ts, value);
const del = (row: string, ts: number, family = 'f', qualifier = 'q'): Entry =>
  makeEntry(row, family, qualifier, ts, '', true);

describe('iterator stack - rules', () => {
  it('merge - k sources come out in key order', async () => {
    const a = [put('a', 1), put('c', 1)];
    const b = [put('b', 1), put('d', 1)];
    const c = [put('a', 2)];
    expect(await run([a, b, c], { versions: 5 })).toEqual(
      show([put('a', 2), put('a', 1), put('b', 1), put('c', 1), put('d', 1)]),
    );
  });

  it('versions - the N newest live versions of a cell are kept', async () => {
    const cell = [put('r', 5), put('r', 4), put('r', 3), put('r', 2)];
    expect(await run([cell], { versions: 1 })).toEqual(show([put('r', 5)]));
    expect(await run([cell], { versions: 3 })).toEqual(show([put('r', 5), put('r', 4), put('r', 3)]));
    // Versions are per cell: another qualifier is another cell.
    expect(await run([[put('r', 5), put('r', 1, 'x', 'f', 'z')]], { versions: 1 })).toHaveLength(2);
  });

  it('deletes - a marker hides its cell at and below its timestamp; versions count live puts only', async () => {
    const cell = [put('r', 9), del('r', 7), put('r', 7), put('r', 6)];
    expect(await run([cell], { versions: 1 })).toEqual(show([put('r', 9)]));
    expect(await run([cell], { versions: 3 })).toEqual(show([put('r', 9)]));
    // In another source the marker still hides: deletes work across files.
    expect(await run([[put('r', 9), put('r', 6)], [del('r', 7)]], { versions: 3 })).toEqual(
      show([put('r', 9)]),
    );
  });

  it('deletes - a partial compaction keeps the newest marker (and only it); a full one drops it', async () => {
    const cell = [put('r', 9), del('r', 8), put('r', 8), del('r', 5), put('r', 4)];
    expect(await run([cell], { versions: 3, dropDeletes: false })).toEqual(show([put('r', 9), del('r', 8)]));
    expect(await run([cell], { versions: 3, dropDeletes: true })).toEqual(show([put('r', 9)]));
  });

  it('age-off - puts older than now - ttl are dropped; markers are kept in partial compactions', async () => {
    const entries = [put('a', 50), put('b', 89), put('c', 90), del('d', 10), put('d', 5)];
    expect(await run([entries], { ttlMs: 10, nowMs: 100 })).toEqual(show([put('c', 90)]));
    expect(await run([entries], { ttlMs: 10, nowMs: 100, dropDeletes: false })).toEqual(
      show([put('c', 90), del('d', 10)]),
    );
  });

  it('age-off after versioning - an aged-off newest version does not let an older one through', async () => {
    expect(await run([[put('r', 80), put('r', 70)]], { versions: 1, ttlMs: 10, nowMs: 100 })).toEqual([]);
  });

  it('filters - built-in filters drop puts, never delete markers', async () => {
    const entries = [put('a1', 1), put('a2', 1, 'v', 'g'), put('b1', 1), del('b2', 1), put('c1', 1)];
    const f = (name: string, options: unknown) => ({ filters: [{ name, options }] });
    expect(await run([entries], f('dropRowPrefix', { prefixes: ['a'] }))).toEqual(
      show([put('b1', 1), put('c1', 1)]),
    );
    expect(await run([entries], f('keepRowPrefix', { prefixes: ['a', { hex: '6331' }] }))).toEqual(
      show([put('a1', 1), put('a2', 1, 'v', 'g'), put('c1', 1)]),
    );
    expect(await run([entries], f('dropFamily', { families: ['g'] }))).toHaveLength(3);
    expect(await run([entries], f('keepFamily', { families: [{ base64: 'Zw==' }] }))).toEqual(
      show([put('a2', 1, 'v', 'g')]),
    );
    expect(await run([entries], f('keepRowRange', { start: 'a2', end: 'c1' }))).toEqual(
      show([put('a2', 1, 'v', 'g'), put('b1', 1)]),
    );
    expect(await run([entries], { ...f('keepRowRange', { start: 'z' }), dropDeletes: false })).toEqual(
      show([del('b2', 1)]),
    );
  });

  it('sources - an unsorted source is BAD_REQUEST, not a wrong result', async () => {
    await expect(run([[put('b', 1), put('a', 1)]], {})).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});

describe('iterator settings - validation', () => {
  const bad = (value: unknown): ExcError => {
    try {
      validateIteratorSettings(value);
    } catch (err) {
      expect(err).toBeInstanceOf(ExcError);
      expect((err as ExcError).code).toBe('BAD_REQUEST');
      return err as ExcError;
    }
    throw new Error('expected BAD_REQUEST');
  };

  it('defaults - versions 1, no filters; nowMs and dropDeletes are required', () => {
    expect(validateIteratorSettings({ nowMs: 5, dropDeletes: true })).toEqual({
      versions: 1,
      ttlMs: undefined,
      nowMs: 5,
      filters: [],
      dropDeletes: true,
    });
    expect(bad({ dropDeletes: true }).message).toContain('nowMs');
    expect(bad({ nowMs: 1 }).message).toContain('dropDeletes');
  });

  it('bad values - named in the error', () => {
    expect(bad({ versions: 0, nowMs: 1, dropDeletes: true }).message).toContain('versions');
    expect(bad({ versions: 1.5, nowMs: 1, dropDeletes: true }).message).toContain('versions');
    expect(bad({ ttlMs: -1, nowMs: 1, dropDeletes: true }).message).toContain('ttlMs');
    expect(bad({ nowMs: 1, dropDeletes: true, extra: 1 }).message).toMatch(/extra|Unrecognized/);
    expect(bad(null).message).toContain('iterator settings');
  });

  it('the stack refuses bad settings at once, before reading anything', () => {
    expect(() => iteratorStack([], { versions: 0, nowMs: 1, filters: [], dropDeletes: true })).toThrow(
      ExcError,
    );
  });
});

describe('filters - a fixed registry, data not code', () => {
  const refused = (filters: unknown, mentions: string): void => {
    let err: unknown;
    try {
      validateFilters(filters);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ExcError);
    expect((err as ExcError).code).toBe('BAD_REQUEST');
    expect((err as ExcError).message).toContain(mentions);
  };

  it('known filters with valid options pass, unchanged', () => {
    const specs = [
      { name: 'dropRowPrefix', options: { prefixes: ['a', { hex: '00ff' }] } },
      { name: 'keepRowRange', options: { start: 'a', endInclusive: true } },
      { name: 'keepRowRange' },
    ];
    expect(validateFilters(specs)).toEqual(specs);
    expect(Object.keys(FILTERS).sort()).toEqual([
      'dropFamily',
      'dropRowPrefix',
      'keepFamily',
      'keepRowPrefix',
      'keepRowRange',
    ]);
  });

  it('unknown names are refused — including the names of Object.prototype', () => {
    for (const name of [
      'nope',
      'constructor',
      '__proto__',
      'toString',
      'hasOwnProperty',
      'valueOf',
      '../../etc/x.js',
    ]) {
      refused([{ name }], `unknown filter ${JSON.stringify(name)}`);
    }
  });

  it('bad options are refused, naming the filter and the option', () => {
    refused([{ name: 'dropRowPrefix', options: {} }], 'dropRowPrefix');
    refused([{ name: 'dropRowPrefix', options: { prefixes: [] } }], 'prefixes');
    refused([{ name: 'dropRowPrefix', options: { prefixes: [1] } }], 'prefixes');
    refused([{ name: 'dropFamily', options: { families: [{ hex: 'abc' }] } }], 'dropFamily');
    refused([{ name: 'keepRowRange', options: { start: 'a', code: 'process.exit()' } }], 'keepRowRange');
    refused([{ name: 'keepFamily', options: { families: ['f'] }, script: 'x' }], 'filter 0');
    // A string UTF-8 cannot hold: as U+FFFD it would drop or keep other rows than the ones named.
    refused(
      [{ name: 'dropRowPrefix', options: { prefixes: ['a\ud800'] } }],
      'prefixes.0: holds a lone UTF-16 surrogate',
    );
    // Base64 that Node's decoder would read as other bytes than it spells: missing padding, bits past the
    // last byte, characters that are not base64. Canonical base64 passes.
    for (const base64 of ['YQ', 'YR==', 'Y Q==', 'YQ==YQ==', 'Y*Q='])
      refused([{ name: 'dropRowPrefix', options: { prefixes: [{ base64 }] } }], 'expected base64');
    expect(
      validateFilters([{ name: 'dropRowPrefix', options: { prefixes: [{ base64: 'AP8=' }] } }]),
    ).toHaveLength(1);
    refused('dropRowPrefix', 'filters');
    refused(
      Array.from({ length: 33 }, () => ({ name: 'keepRowRange' })),
      'at most 32',
    );
  });
});
