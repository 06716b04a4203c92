import { describe, expect, it } from 'vitest';
import {
  DEFAULT_TABLE_CONFIG,
  parseConfigAssignments,
  tableConfigSchema,
} from '../../src/meta/table-config.js';
import { reservationSchema } from '../../src/meta/tablet.js';

describe('table config - compression', () => {
  it('defaults to zstd, and a stored config written before the setting existed reads as zstd', () => {
    expect(DEFAULT_TABLE_CONFIG.compression).toBe('zstd');
    expect(tableConfigSchema.parse({ versions: 3 }).compression).toBe('zstd');
  });

  it('compression=<codec> on the command line sets it; an unknown codec is BAD_REQUEST naming the codecs', () => {
    for (const codec of ['none', 'deflate', 'lz4', 'zstd']) {
      expect(parseConfigAssignments([`compression=${codec}`])).toEqual({ compression: codec });
    }
    expect(() => parseConfigAssignments(['compression=gzip'])).toThrow(/none, deflate, lz4, zstd/);
    expect(() => tableConfigSchema.parse({ compression: 'snappy' })).toThrow();
  });

  it('a reservation carries it, and one made before it existed still parses (the compactor uses the default)', () => {
    const base = {
      compactor: '/c/1',
      queueId: 'q1',
      inputs: ['a.rf'],
      output: 'o.rf',
      kind: 'system',
      attempt: 0,
      reservedAt: 1,
      allFiles: true,
      settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: true },
    };
    expect(reservationSchema.parse({ ...base, compression: 'lz4' }).compression).toBe('lz4');
    expect(reservationSchema.parse(base).compression).toBeUndefined();
    expect(() => reservationSchema.parse({ ...base, compression: 'gzip' })).toThrow();
  });
});

describe('table config - block size and split jobs', () => {
  it('blockSize, splitAbove and maxSplits: defaults, sizes with units, bounds refused', () => {
    expect(DEFAULT_TABLE_CONFIG).toMatchObject({ blockSize: 64 * 1024, splitAbove: 1024 ** 3, maxSplits: 8 });
    expect(parseConfigAssignments(['blockSize=4K', 'splitAbove=512M', 'maxSplits=4'])).toEqual({
      blockSize: 4096,
      splitAbove: 512 * 1024 * 1024,
      maxSplits: 4,
    });
    expect(() => parseConfigAssignments(['splitAbove=lots'])).toThrow(/not a size/);
    for (const bad of [
      { blockSize: 100 },
      { blockSize: 64 * 1024 * 1024 },
      { maxSplits: 0 },
      { maxSplits: 65 },
    ]) {
      expect(() => tableConfigSchema.parse(bad), JSON.stringify(bad)).toThrow();
    }
  });
});
