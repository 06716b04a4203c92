import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  COMPRESSIONS,
  compareKeys,
  makeEntry,
  MemoryObjectStore,
  mergeBlockBatches,
  RFileReader,
  rowInRange,
  writeRFile,
  writeRFileBatches,
  type Entry,
  type ObjectStore,
  type StreamOptions,
} from '../../src/storage/index.js';
import { collect } from '../support/entries.js';
import { rangeArb, runs, sorted, wideEntryArb } from './arbitraries.js';
import { blockCounts } from './blocks-of.js';
import { modelStats, show } from './model.js';

/** Entries `row000000`… with 100-byte values: a file of many blocks. */
function* numbered(n: number): Generator<Entry> {
  for (let i = 0; i < n; i++) {
    yield makeEntry(`row${String(i).padStart(6, '0')}`, 'cf', 'cq', 1000, Buffer.alloc(100, i & 0xff));
  }
}

describe('rfile - write and read', () => {
  it('round trip - any sorted entries come back exactly, with the right summary, for any block sizes and codec', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(wideEntryArb, { maxLength: 60 }),
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 1, max: 512 }),
        fc.constantFrom(...COMPRESSIONS),
        async (raw, blockSize, indexBlockSize, compression) => {
          const entries = sorted(raw);
          const store = new MemoryObjectStore();
          const summary = await writeRFile(store, 'f.rf', entries, {
            blockSize,
            indexBlockSize,
            compression,
          });
          expect(summary.entries).toBe(entries.length);
          expect(summary.size).toBe((await store.stat('f.rf'))!.size);
          // The stats are counted as entries go in; the footer does not hold them.
          expect(summary.stats).toEqual(modelStats(entries, await blockCounts(store, 'f.rf')));
          const { stats: _stats, ...footer } = summary;
          const reader = await RFileReader.open(store, 'f.rf');
          expect(reader.summary).toEqual(footer);
          if (entries.length > 0) {
            expect(compareKeys(summary.firstKey!, entries[0]!.key)).toBe(0);
            expect(compareKeys(summary.lastKey!, entries[entries.length - 1]!.key)).toBe(0);
            expect(summary.blocks).toBeGreaterThanOrEqual(1);
          } else {
            expect(summary).toMatchObject({ firstKey: null, lastKey: null, blocks: 0 });
          }
          expect(show(await collect(reader.scan()))).toEqual(show(entries));
        },
      ),
      { numRuns: runs(300) },
    );
  });

  it('file entries - rewritten from their blocks, in runs or interleaved, they make the file plain entries make', async () => {
    // The writer copies entries that follow each other in one decoded block with one copy (and skips
    // their order check); a file written from blocks must be the file written from the same entries.
    await fc.assert(
      fc.asyncProperty(
        fc.array(wideEntryArb, { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 64, max: 2048 }),
        fc.constantFrom(...COMPRESSIONS),
        async (raw, files, blockSize, compression) => {
          const entries = sorted(raw);
          const store = new MemoryObjectStore();
          // The entries dealt to `files` files in runs of random length: a merge of them meets runs
          // from one block, block ends and sources taking turns.
          const dealt: Entry[][] = Array.from({ length: files }, () => []);
          for (let i = 0, f = 0; i < entries.length; f = (f + 1) % files) {
            const run = 1 + ((i * 7) % 5);
            dealt[f]!.push(...entries.slice(i, i + run));
            i += run;
          }
          for (const [f, part] of dealt.entries()) await writeRFile(store, `in${f}.rf`, part, { blockSize });
          const readers = await Promise.all(dealt.map((_, f) => RFileReader.open(store, `in${f}.rf`)));
          const fromBlocks = await writeRFileBatches(
            store,
            'blocks.rf',
            mergeBlockBatches(
              readers.map((r) => r.scanBatches()),
              () => true,
            ),
            { blockSize, compression },
          );
          const plain = await writeRFile(store, 'plain.rf', entries, { blockSize, compression });
          expect(fromBlocks).toEqual(plain);
          expect(fromBlocks.stats).toEqual(modelStats(entries, await blockCounts(store, 'plain.rf')));
          expect(store.bytes('blocks.rf').equals(store.bytes('plain.rf'))).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('row ranges - a scan returns exactly the entries whose row is in the range', async () => {
    const ranged = fc.array(
      fc.record({ row: fc.constantFrom('', 'a', 'ab', 'abc', 'b', 'ba', 'c'), ts: fc.nat(5) }),
      { maxLength: 80 },
    );
    await fc.assert(
      fc.asyncProperty(
        ranged,
        rangeArb,
        fc.integer({ min: 1, max: 120 }),
        fc.integer({ min: 1, max: 90 }),
        async (rows, range, blockSize, indexBlockSize) => {
          const entries = sorted(rows.map((r, i) => makeEntry(r.row, 'f', 'q', r.ts, String(i))));
          const store = new MemoryObjectStore();
          await writeRFile(store, 'r.rf', entries, { blockSize, indexBlockSize });
          const reader = await RFileReader.open(store, 'r.rf');
          const got = await collect(reader.scan(range));
          expect(show(got)).toEqual(show(entries.filter((e) => rowInRange(e.key.row, range))));
        },
      ),
      { numRuns: runs(400) },
    );
  });

  it('seek - a scan of one row reads a few blocks, not the file', async () => {
    const store = new MemoryObjectStore();
    const summary = await writeRFile(store, 'big.rf', numbered(100_000), {
      blockSize: 4096,
      indexBlockSize: 4096,
    });
    expect(summary.blocks).toBeGreaterThan(1000);
    const reader = await RFileReader.open(store, 'big.rf');
    store.stats.bytesRead = 0;
    const row = Buffer.from('row054321');
    const got = await collect(reader.scan({ startRow: row, endRow: row, endInclusive: true }));
    expect(got.map((e) => e.key.row.toString())).toEqual(['row054321']);
    // One index block and a data block or two (plus read-ahead within one stream chunk).
    expect(store.stats.bytesRead).toBeLessThan(300_000);
    expect(store.stats.bytesRead).toBeLessThan(summary.size / 30);
  });

  it('streaming - the writer hands bytes to the store long before its input ends', async () => {
    const store = new MemoryObjectStore();
    let produced = 0;
    let producedAtFirstChunk = -1;
    const observing: ObjectStore = Object.create(store) as ObjectStore;
    observing.write = async (name, body, options) => {
      async function* watch(): AsyncGenerator<Buffer> {
        for await (const chunk of body as AsyncIterable<Buffer>) {
          if (producedAtFirstChunk < 0) producedAtFirstChunk = produced;
          yield chunk;
        }
      }
      return store.write(name, watch(), options);
    };
    function* counted(): Generator<Entry> {
      for (const e of numbered(50_000)) {
        produced++;
        yield e;
      }
    }
    await writeRFile(observing, 's.rf', counted());
    expect(produced).toBe(50_000);
    expect(producedAtFirstChunk).toBeGreaterThan(0);
    expect(producedAtFirstChunk).toBeLessThan(2_000);
  });

  it('streaming - the reader returns the first entries after reading the first chunk, not the file', async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 's.rf', numbered(50_000));
    let chunks = 0;
    const observing: ObjectStore = Object.create(store) as ObjectStore;
    observing.readStream = (name: string, options?: StreamOptions) =>
      (async function* () {
        for await (const c of store.readStream(name, options)) {
          chunks++;
          yield c;
        }
      })();
    const reader = await RFileReader.open(observing, 's.rf');
    for await (const e of reader.scan()) {
      expect(e.key.row.toString()).toBe('row000000');
      break;
    }
    expect(chunks).toBe(1);
  });

  it('order - out-of-order input is rejected with BAD_REQUEST naming the file and keys, and nothing is written', async () => {
    const store = new MemoryObjectStore();
    const entries = [makeEntry('b', 'f', 'q', 1), makeEntry('a', 'f', 'q', 1)];
    const err = await writeRFile(store, 'bad.rf', entries).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BAD_REQUEST' });
    expect((err as Error).message).toContain('writing bad.rf:'); // by its key, not the store's URL
    expect((err as Error).message).not.toContain('memory://');
    expect((err as Error).message).toContain('"a" "f":"q" @1 after "b" "f":"q" @1');
    expect(await store.stat('bad.rf')).toBeNull();
    // Equal keys must come in value order; equal entries are fine.
    await expect(
      writeRFile(store, 'v.rf', [makeEntry('a', 'f', 'q', 1, 'y'), makeEntry('a', 'f', 'q', 1, 'x')]),
    ).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    });
    await writeRFile(store, 'dup.rf', [makeEntry('a', 'f', 'q', 1, 'x'), makeEntry('a', 'f', 'q', 1, 'x')]);
    expect((await RFileReader.open(store, 'dup.rf')).summary.entries).toBe(2);
  });

  it('malformed entries are rejected with BAD_REQUEST: bad timestamps, fields that are not Buffers', async () => {
    const store = new MemoryObjectStore();
    const good = makeEntry('a', 'f', 'q', 1);
    for (const bad of [
      { ...good, key: { ...good.key, timestamp: -1 } },
      { ...good, key: { ...good.key, timestamp: 2 ** 53 } },
      { ...good, key: { ...good.key, timestamp: 1.5 } },
      { ...good, key: { ...good.key, row: 'a' as unknown as Buffer } },
      { ...good, value: undefined as unknown as Buffer },
    ]) {
      await expect(writeRFile(store, 'm.rf', [bad])).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    }
    expect(await store.stat('m.rf')).toBeNull();
  });

  it('empty file - no entries, only a footer; opens and scans to nothing', async () => {
    const store = new MemoryObjectStore();
    const summary = await writeRFile(store, 'e.rf', []);
    expect(summary).toEqual({ entries: 0, size: 36, firstKey: null, lastKey: null, blocks: 0 });
    const reader = await RFileReader.open(store, 'e.rf');
    expect(await collect(reader.scan())).toEqual([]);
  });

  it('an entry larger than the block size gets a block of its own', async () => {
    const store = new MemoryObjectStore();
    const entries = [
      makeEntry('a', 'f', 'q', 1, 'small'),
      makeEntry('b', 'f', 'q', 1, Buffer.alloc(300_000, 1)),
      makeEntry('c', 'f', 'q', 1),
    ];
    const summary = await writeRFile(store, 'l.rf', entries, { blockSize: 1024 });
    expect(summary.blocks).toBe(3);
    expect(show(await collect((await RFileReader.open(store, 'l.rf')).scan()))).toEqual(show(entries));
  });

  it('missing file - OBJECT_NOT_FOUND naming it', async () => {
    const err = await RFileReader.open(new MemoryObjectStore(), 'no.rf').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'OBJECT_NOT_FOUND' });
    expect((err as Error).message).toContain('no.rf');
  });

  it('abort - an aborted write leaves no file', async () => {
    const store = new MemoryObjectStore();
    const controller = new AbortController();
    function* entries(): Generator<Entry> {
      let i = 0;
      for (const e of numbered(20_000)) {
        if (++i === 10_000) controller.abort(new Error('cancelled'));
        yield e;
      }
    }
    await expect(writeRFile(store, 'a.rf', entries(), { signal: controller.signal })).rejects.toThrow(
      'cancelled',
    );
    expect(await store.stat('a.rf')).toBeNull();
  });

  it('options - a bad block size or codec is BAD_REQUEST', async () => {
    const store = new MemoryObjectStore();
    await expect(writeRFile(store, 'o.rf', [], { blockSize: 0 })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    });
    await expect(writeRFile(store, 'o.rf', [], { compression: 'gzip' as 'none' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    });
  });
});
