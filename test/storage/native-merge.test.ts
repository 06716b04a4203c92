/**
 * The native merge (native/merge.c, src/storage/native-merge.ts) against the JavaScript merge it stands
 * in for: on the same random inputs, settings, codec, block size and row range, the same file byte for
 * byte, the same entries read, the same summary (its stats those of the file's entries, families counted
 * by the same per-block rule); a run killed after a checkpoint by one and resumed by the other, the same
 * file as an uninterrupted run (a cluster may mix compactors that have the binding and some that do
 * not); the same error for a damaged block.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  compileSettings,
  MemoryObjectStore,
  RFileReader,
  writeRFile,
  type Checkpoint,
  type CompactFilesArgs,
  type IteratorSettings,
} from '../../src/storage/index.js';
import { nativeMerge, runsNatively } from '../../src/storage/native-merge.js';
import { BLOCK_HEADER_SIZE, crc32 } from '../../src/storage/rfile/codec.js';
import { collect } from '../support/entries.js';
import { entryArb, ROWS, runs, settingsArb, sorted, wideEntryArb } from './arbitraries.js';
import { blockCounts } from './blocks-of.js';
import { modelStats } from './model.js';

const available = nativeMerge() !== null;

const noFilters = settingsArb.map((s) => ({ ...s, filters: [] }));

const rangeArb = fc.record(
  {
    start: fc.constantFrom(...ROWS).map((r) => Buffer.from(r, 'latin1').toString('hex')),
    end: fc.constantFrom(...ROWS).map((r) => Buffer.from(r, 'latin1').toString('hex')),
  },
  { requiredKeys: [] },
);

const filesArb = fc.array(
  fc
    .array(fc.oneof({ weight: 4, arbitrary: entryArb }, { weight: 1, arbitrary: wideEntryArb }), {
      maxLength: 60,
    })
    .map(sorted),
  { minLength: 1, maxLength: 5 },
);

async function storeWith(files: ReturnType<typeof sorted>[]): Promise<{
  store: MemoryObjectStore;
  inputs: string[];
}> {
  const store = new MemoryObjectStore();
  const inputs: string[] = [];
  for (const [i, entries] of files.entries()) {
    inputs.push(`tables/t/I${i}.rf`);
    // Small blocks: the merge meets block ends in the middle of cells.
    await writeRFile(store, inputs[i]!, entries, { blockSize: 48, compression: 'none' });
  }
  return { store, inputs };
}

async function compactWith(native: boolean, args: CompactFilesArgs) {
  const result = await compactFiles({ ...args, nativeMerge: native });
  const bytes = result.empty ? null : await read(args.store as MemoryObjectStore, args.output);
  return { result, bytes };
}

async function read(store: MemoryObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe.skipIf(!available)('native merge', () => {
  it('runs for jobs without filters only', () => {
    const settings: IteratorSettings = { versions: 1, nowMs: 0, filters: [], dropDeletes: true };
    expect(runsNatively(compileSettings(settings))).toBe(true);
    const filtered = { ...settings, filters: [{ name: 'dropFamily', options: { families: ['f'] } }] };
    expect(runsNatively(compileSettings(filtered))).toBe(false);
  });

  it('writes the file the JavaScript merge writes, byte for byte, with the same stats', async () => {
    const seen = { deletesKept: 0, deletesDropped: 0 };
    await fc.assert(
      fc.asyncProperty(
        filesArb,
        noFilters,
        fc.constantFrom(...COMPRESSIONS),
        fc.integer({ min: 16, max: 400 }),
        fc.option(rangeArb, { nil: undefined }),
        async (files, settings, compression, blockSize, range) => {
          const { store, inputs } = await storeWith(files);
          const args = { store, inputs, settings, compression, blockSize, ...(range ? { range } : {}) };
          const js = await compactWith(false, { ...args, output: 'tables/t/Cjs.rf' });
          const native = await compactWith(true, { ...args, output: 'tables/t/Cnative.rf' });
          expect(native.result.nativeMerge).toBe(true);
          expect(js.result.nativeMerge).toBe(false);
          expect(native.result.empty).toBe(js.result.empty);
          expect(native.result.entriesRead).toBe(js.result.entriesRead);
          expect(native.result.entriesWritten).toBe(js.result.entriesWritten);
          expect(native.result.output).toEqual(js.result.output);
          expect(native.bytes?.equals(js.bytes!) ?? js.bytes === null).toBe(true);
          if (js.result.empty) return;
          // The stats describe the file written (its families counted per data block, when more than 16).
          const written = await collect((await RFileReader.open(store, 'tables/t/Cjs.rf')).scan());
          const expected = modelStats(written, await blockCounts(store, 'tables/t/Cjs.rf'));
          expect(native.result.output?.stats).toEqual(expected);
          expect(js.result.output?.stats).toEqual(expected);
          if (settings.dropDeletes) seen.deletesDropped++;
          else if (written.some((e) => e.key.deleted)) seen.deletesKept++;
        },
      ),
      { numRuns: runs(300) },
    );
    // Both kinds of job ran: markers dropped (a full compaction), and kept (a partial one).
    expect(seen.deletesDropped).toBeGreaterThan(30);
    expect(seen.deletesKept).toBeGreaterThan(30);
  });

  it('resumes what the JavaScript merge checkpointed, and the other way round, to the same bytes', async () => {
    let resumes = 0;
    await fc.assert(
      fc.asyncProperty(
        filesArb,
        noFilters,
        fc.constantFrom(...COMPRESSIONS),
        // Small blocks: many of them end inside a cell, where no checkpoint may follow.
        fc.integer({ min: 16, max: 60 }),
        fc.nat(3),
        fc.boolean(),
        async (files, settings, compression, blockSize, killAfter, firstNative) => {
          const { store, inputs } = await storeWith(files);
          const common = { store, inputs, settings, compression, blockSize };
          const whole = await compactWith(!firstNative, { ...common, output: 'tables/t/Cwhole.rf' });
          if (whole.result.empty) return;
          const controller = new AbortController();
          let checkpoint: Checkpoint | undefined;
          let seen = 0;
          await compactFiles({
            ...common,
            nativeMerge: firstNative,
            output: 'tables/t/C1.rf',
            signal: controller.signal,
            checkpoints: {
              everyBytes: 1,
              everyMs: 60_000,
              onCheckpoint: (cp) => {
                checkpoint = cp;
                if (seen++ === killAfter) controller.abort(new Error('killed'));
              },
            },
          }).catch((err: unknown) => {
            if ((err as Error).message !== 'killed') throw err;
          });
          if (checkpoint === undefined) return;
          resumes++;
          const resumed = await compactWith(!firstNative, {
            ...common,
            output: 'tables/t/C2.rf',
            resume: checkpoint,
          });
          expect(resumed.bytes!.equals(whole.bytes!)).toBe(true);
          expect(resumed.result.output?.stats).toBeDefined();
          expect(resumed.result.output).toEqual(whole.result.output);
        },
      ),
      { numRuns: runs(500) },
    );
    // Most cases are resumed (the rest have no checkpoint: an output of one block).
    expect(resumes).toBeGreaterThan(150);
  });

  it('meets any damage inside a block as the JavaScript merge does: the same error, or the same file', async () => {
    // Damage that passes the checksums (a writer's bug, or a hostile file with its checksums made
    // right): random bytes of a data block's payload changed, the block's checksums recomputed. The
    // native decoder must refuse what the JavaScript one refuses, with the same words, and never read
    // outside the block.
    const store = new MemoryObjectStore();
    const entries = sorted(
      Array.from({ length: 60 }, (_, i) => ({
        key: {
          row: Buffer.from(`r${String(i % 20).padStart(2, '0')}`),
          family: Buffer.from(i % 3 === 0 ? '' : 'f'),
          qualifier: Buffer.from('q'.repeat(i % 4)),
          timestamp: [5, 2 ** 32, 7][i % 3]!,
          deleted: i % 7 === 0,
        },
        value: Buffer.alloc(i % 5 === 0 ? 200 : 3, i),
      })),
    );
    await writeRFile(store, 'tables/t/b.rf', entries.slice(0, 10), { compression: 'none' });
    await writeRFile(store, 'tables/t/a.rf', entries, { blockSize: 400, compression: 'none' });
    const original = await read(store, 'tables/t/a.rf');
    const firstLength = original.readUInt32BE(8);
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(firstLength - 1), byte: fc.integer({ min: 0, max: 255 }) }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.boolean(),
        async (changes, dropDeletes) => {
          const file = Buffer.from(original);
          const payload = file.subarray(BLOCK_HEADER_SIZE, BLOCK_HEADER_SIZE + firstLength);
          for (const c of changes) payload[c.at] = c.byte;
          file.writeUInt32BE(crc32(payload), 20);
          file.writeUInt32BE(crc32(file.subarray(0, 24)), 24);
          await store.write(
            'tables/t/a.rf',
            (async function* () {
              yield file;
            })(),
          );
          const args = {
            store,
            inputs: ['tables/t/a.rf', 'tables/t/b.rf'],
            settings: { versions: 2, nowMs: 0, filters: [], dropDeletes },
          };
          const outcome = async (native: boolean) =>
            compactWith(native, { ...args, output: `tables/t/C${native}.rf` }).then(
              (r) => ({ bytes: r.bytes?.toString('hex') ?? null, error: null }),
              (err: unknown) => ({ bytes: null, error: (err as Error).message }),
            );
          const js = await outcome(false);
          if (js.error !== null) refused++;
          expect(await outcome(true)).toEqual(js);
        },
      ),
      { numRuns: runs(300) },
    );
    // Many changes break the block (about a quarter; the rest change a value, a key or a timestamp).
    expect(refused).toBeGreaterThan(30);
  });

  it('fails on a damaged block as the JavaScript merge does, naming the file and the block', async () => {
    const entries = Array.from({ length: 40 }, (_, i) => ({
      key: {
        row: Buffer.from(`r${String(i).padStart(3, '0')}`),
        family: Buffer.from('f'),
        qualifier: Buffer.from('q'),
        timestamp: 5,
        deleted: false,
      },
      value: Buffer.from('v'),
    }));
    const store = new MemoryObjectStore();
    await writeRFile(store, 'tables/t/a.rf', entries, { blockSize: 100, compression: 'none' });
    await writeRFile(store, 'tables/t/b.rf', entries.slice(0, 3), { compression: 'none' });
    const file = await read(store, 'tables/t/a.rf');
    // Data block 1: swap the rows of its first two entries (their order breaks), checksum made right,
    // so that only decoding finds the damage.
    const first = BLOCK_HEADER_SIZE + file.readUInt32BE(8);
    const payload = file.subarray(
      first + BLOCK_HEADER_SIZE,
      first + BLOCK_HEADER_SIZE + file.readUInt32BE(first + 8),
    );
    const entrySize = 1 + 4 + 8 + 4 + 1 + 1 + 1;
    const rowAt = 1 + 4 + 8;
    const a = Buffer.from(payload.subarray(rowAt, rowAt + 4));
    payload.subarray(entrySize + rowAt, entrySize + rowAt + 4).copy(payload, rowAt);
    a.copy(payload, entrySize + rowAt);
    file.writeUInt32BE(crc32(payload), first + 20);
    file.writeUInt32BE(crc32(file.subarray(first, first + 24)), first + 24);
    await store.write(
      'tables/t/a.rf',
      (async function* () {
        yield file;
      })(),
    );
    const args = {
      store,
      inputs: ['tables/t/a.rf', 'tables/t/b.rf'],
      settings: { versions: 1, nowMs: 0, filters: [], dropDeletes: true },
    };
    const errorOf = async (native: boolean): Promise<unknown> =>
      compactWith(native, { ...args, output: `tables/t/C${native}.rf` }).then(
        () => null,
        (err: unknown) => err,
      );
    const js = await errorOf(false);
    const native = await errorOf(true);
    expect(js).toMatchObject({ code: 'CORRUPT_FILE' });
    expect((js as Error).message).toContain('data block 1');
    expect((js as Error).message).toContain('out of order');
    expect(native).toMatchObject({ code: 'CORRUPT_FILE', message: (js as Error).message });
  });
});
