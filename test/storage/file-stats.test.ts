/**
 * The stats a file's summary reports (FileStats: delete markers, oldest and newest timestamp) across
 * checkpoints: a checkpoint records those of the blocks placed before it, not of blocks still being
 * deflated or filled (a resumed run writes those again); its state carries them, and a state of an older
 * version, without them, still resumes, to a file whose summary has none. Families: a block names the
 * first 16 it meets, the file adds a block's while it names fewer than 16; the JavaScript and native
 * merges count them alike, resumed or not.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  makeEntry,
  MAX_FAMILIES,
  MemoryObjectStore,
  RFileEncoder,
  RFileReader,
  writeRFile,
  type Checkpoint,
  type Entry,
} from '../../src/storage/index.js';
import {
  decodeEncoderState,
  encodeEncoderState,
  type EncoderState,
} from '../../src/storage/rfile/encoder-state.js';
import { nativeMerge } from '../../src/storage/native-merge.js';
import { collect } from '../support/entries.js';
import { fileArb, runs, sorted } from './arbitraries.js';
import { blockCounts } from './blocks-of.js';
import { modelStats, type ModelStats } from './model.js';

/** Rows r0000…, timestamps rising with the row, every third entry a delete marker. */
const rising = (n: number): Entry[] =>
  Array.from({ length: n }, (_, i) =>
    makeEntry(`r${String(i).padStart(4, '0')}`, 'f', 'q', 1_000 + i, i % 3 === 0 ? '' : 'v', i % 3 === 0),
  );

/** The checkpoint states the encoder hands out while it writes `entries` in batches of `batch`. */
async function checkpointsOf(
  entries: Entry[],
  options: { compression: (typeof COMPRESSIONS)[number]; blockSize: number; batch: number },
): Promise<EncoderState[]> {
  const encoder = new RFileEncoder('t.rf', options);
  encoder.checkpointEvery(1);
  const batches = Array.from({ length: Math.ceil(entries.length / options.batch) }, (_, i) =>
    entries.slice(i * options.batch, (i + 1) * options.batch),
  );
  const states: EncoderState[] = [];
  for await (const chunk of encoder.encodeMarked(batches)) if (!Buffer.isBuffer(chunk)) states.push(chunk);
  return states;
}

function errorCode(f: () => unknown): string | null {
  try {
    f();
    return null;
  } catch (err) {
    return (err as { code?: string }).code ?? 'none';
  }
}

describe('file stats - checkpoints', () => {
  it('a checkpoint records the stats of the blocks placed before it, not of those still being deflated or filled', async () => {
    const entries = rising(400);
    // Batches of many blocks: when a block is placed, the next ones are deflating or being filled.
    const states = await checkpointsOf(entries, { compression: 'deflate', blockSize: 64, batch: 50 });
    expect(states.length).toBeGreaterThan(20);
    for (const s of states) {
      expect(s.entries).toBeLessThan(entries.length);
      expect(s.stats).toEqual(modelStats(entries.slice(0, s.entries)));
      // Survives the codec the metadata store keeps it in.
      expect(decodeEncoderState(encodeEncoderState(s)).stats).toEqual(s.stats);
    }
  });

  it('property - every checkpoint records the stats of the entries before it, for any codec and block size', async () => {
    let checked = 0;
    await fc.assert(
      fc.asyncProperty(
        fileArb(80),
        fc.constantFrom(...COMPRESSIONS),
        fc.integer({ min: 16, max: 100 }),
        fc.integer({ min: 1, max: 40 }),
        async (entries, compression, blockSize, batch) => {
          const states = await checkpointsOf(entries, { compression, blockSize, batch });
          for (const s of states) expect(s.stats).toEqual(modelStats(entries.slice(0, s.entries)));
          checked += states.length;
        },
      ),
      { numRuns: runs(150) },
    );
    // About 1.6 checkpoints a case; the bound is far below, so that it never fails by chance.
    expect(checked).toBeGreaterThan(runs(150) / 2);
  });
});

describe('file stats - checkpoint state', () => {
  it('the state carries the stats; absent or null they decode as such; malformed ones are BAD_REQUEST', async () => {
    const [state] = await checkpointsOf(rising(40), { compression: 'none', blockSize: 64, batch: 40 });
    const json = JSON.parse(encodeEncoderState(state!)) as Record<string, unknown>;
    expect(json.stats).toEqual(modelStats(rising(40).slice(0, state!.entries)));
    const without = { ...json };
    delete without.stats;
    expect('stats' in decodeEncoderState(JSON.stringify(without))).toBe(false);
    expect(decodeEncoderState(JSON.stringify({ ...json, stats: null })).stats).toBeNull();
    // Each a well-formed record (the first decodes) but for one field.
    const good = json.stats as ModelStats;
    const n = state!.entries;
    const seventeen = Array.from({ length: 17 }, (_, i): [string, number] => [
      i.toString(16).padStart(2, '0'),
      i === 0 ? n : 0,
    ]);
    expect(decodeEncoderState(JSON.stringify({ ...json, stats: good })).stats).toEqual(good);
    for (const stats of [
      { ...good, oldestTs: good.newestTs + 1 },
      { ...good, deletes: -1 },
      { ...good, oldestTs: 1.5 },
      { ...good, keyBytes: undefined },
      { ...good, valueBytes: -2 },
      { ...good, otherFamilies: 0.5 },
      { ...good, families: undefined },
      // Not hex, upper-case hex, half a byte.
      { ...good, families: [['fg', n]] },
      { ...good, families: [['66A0', n]] },
      { ...good, families: [['660', n]] },
      // Out of order, twice the same family, more than 16.
      {
        ...good,
        families: [
          ['67', 1],
          ['66', n - 1],
        ],
      },
      {
        ...good,
        families: [
          ['66', 1],
          ['66', n - 1],
        ],
      },
      { ...good, families: seventeen, otherFamilies: 0 },
      { ...good, families: [['66', -1]], otherFamilies: n + 1 },
      // Counts that do not add up to the state's entries.
      { ...good, otherFamilies: good.otherFamilies + 1 },
      { deletes: 1, oldestTs: 1, newestTs: 2 },
    ]) {
      expect(errorCode(() => decodeEncoderState(JSON.stringify({ ...json, stats })))).toBe('BAD_REQUEST');
    }
  });

  it('a state without stats (an older version wrote it) resumes to the same bytes, and the summary has no stats', async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'tables/t/I0.rf', rising(300), { blockSize: 64 });
    const common = {
      store,
      inputs: ['tables/t/I0.rf'],
      settings: { versions: 1, nowMs: 0, filters: [], dropDeletes: false },
      blockSize: 64,
      compression: 'deflate' as const,
    };
    const whole = await compactFiles({ ...common, output: 'tables/t/Cwhole.rf' });
    expect(whole.output?.stats).toEqual(modelStats(rising(300)));

    const abort = new AbortController();
    let checkpoint: Checkpoint | undefined;
    await compactFiles({
      ...common,
      output: 'tables/t/C1.rf',
      signal: abort.signal,
      checkpoints: {
        everyBytes: 500,
        everyMs: 60_000,
        onCheckpoint: (cp) => {
          checkpoint = cp;
          abort.abort(new Error('killed'));
        },
      },
    }).catch((err: unknown) => {
      if ((err as Error).message !== 'killed') throw err;
    });
    expect(checkpoint).toBeDefined();
    const old = JSON.parse(checkpoint!.state) as Record<string, unknown>;
    expect(old.stats).toBeDefined();
    delete old.stats;

    // The resumed run's own checkpoints must not make up stats either: a later resume knows none.
    const later: Record<string, unknown>[] = [];
    const resumed = await compactFiles({
      ...common,
      output: 'tables/t/C2.rf',
      resume: { ...checkpoint!, state: JSON.stringify(old) },
      checkpoints: {
        everyBytes: 500,
        everyMs: 60_000,
        onCheckpoint: (cp) => later.push(JSON.parse(cp.state) as Record<string, unknown>),
      },
    });
    expect(store.bytes('tables/t/C2.rf').equals(store.bytes('tables/t/Cwhole.rf'))).toBe(true);
    expect(resumed.output).not.toHaveProperty('stats');
    const { stats: _stats, ...rest } = whole.output!;
    expect(resumed.output).toEqual(rest);
    expect(later.length).toBeGreaterThan(0);
    for (const s of later) expect(s).not.toHaveProperty('stats');
  });
});

/** Entries of row `row`, one per family f<from>…f<to - 1>: 19 bytes each (row, family, qualifier, value 1, 3, 1, 1). */
const familyEntries = (row: string, from: number, to: number): Entry[] =>
  Array.from({ length: to - from }, (_, i) =>
    makeEntry(row, `f${String(from + i).padStart(2, '0')}`, 'q', 7, 'v'),
  );

const familyHex = (i: number): string => Buffer.from(`f${String(i).padStart(2, '0')}`).toString('hex');

const merges = nativeMerge() === null ? [false] : [false, true];

const keep = { versions: 1, nowMs: 0, filters: [], dropDeletes: false };

/** What a FileStats must hold whatever the blocks: at most 16 families, sorted, counting every entry. */
function expectConsistent(stats: ModelStats | undefined, entries: number): void {
  expect(stats).toBeDefined();
  const { families, otherFamilies } = stats!;
  expect(families.length).toBeLessThanOrEqual(MAX_FAMILIES);
  expect(families.map(([f]) => f)).toEqual(families.map(([f]) => f).sort());
  expect(families.reduce((sum, [, n]) => sum + n, otherFamilies)).toBe(entries);
}

describe('file stats - families', () => {
  it('a block names the first 16 families it meets; placed, it adds them to the file while the file names fewer than 16', async () => {
    // Two blocks of 17 entries (blockSize 17 × 19 bytes): f03…f18 named, f19 other; then f00…f15 named,
    // f16 other, of which f00, f01 and f02 are new to a file that names 16 already.
    const entries = [...familyEntries('a', 3, 20), ...familyEntries('b', 0, 17)];
    const expected = {
      deletes: 0,
      oldestTs: 7,
      newestTs: 7,
      keyBytes: 34 * 5,
      valueBytes: 34,
      families: Array.from({ length: 16 }, (_, i): [string, number] => [familyHex(3 + i), i < 13 ? 2 : 1]),
      otherFamilies: 1 + 1 + 3,
    };
    const store = new MemoryObjectStore();
    const summary = await writeRFile(store, 'tables/t/I0.rf', entries, { blockSize: 17 * 19 });
    expect(await blockCounts(store, 'tables/t/I0.rf')).toEqual([17, 17]);
    expect(summary.stats).toEqual(expected);
    expect(modelStats(entries, [17, 17])).toEqual(expected);
    // A compaction that keeps every entry writes the same blocks: the same stats, by either merge.
    for (const native of merges) {
      const result = await compactFiles({
        store,
        inputs: ['tables/t/I0.rf'],
        output: `tables/t/C${native}.rf`,
        settings: keep,
        blockSize: 17 * 19,
        compression: 'zstd',
        nativeMerge: native,
      });
      expect(result.nativeMerge).toBe(native);
      expect(result.output?.stats).toEqual(expected);
    }
  });

  it('property - more than 16 families: the same stats from either merge, unbroken or resumed by the other, and what the model counts per block', async () => {
    const familyArb = fc.integer({ min: 0, max: 39 });
    const entriesArb = fc
      .array(
        fc.record({
          row: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
          family: familyArb,
          qualifier: fc.constantFrom('', 'q'),
          timestamp: fc.integer({ min: 0, max: 5 }),
          value: fc.constantFrom('', 'v', 'wide value'),
        }),
        // Long enough to hold more than 16 of the 40 families, mostly.
        { minLength: 20, maxLength: 200, size: 'max' },
      )
      .map((raw) =>
        sorted(raw.map((r) => makeEntry(r.row, `f${r.family}`, r.qualifier, r.timestamp, r.value))),
      );
    let many = 0;
    await fc.assert(
      fc.asyncProperty(
        entriesArb,
        fc.integer({ min: 40, max: 600 }),
        fc.constantFrom(...merges),
        fc.constantFrom(...merges),
        fc.nat(3),
        async (entries, blockSize, firstNative, thenNative, killAfter) => {
          const store = new MemoryObjectStore();
          await writeRFile(store, 'tables/t/I0.rf', entries, { blockSize: 64 });
          const common = {
            store,
            inputs: ['tables/t/I0.rf'],
            settings: keep,
            blockSize,
            compression: 'deflate' as const,
          };
          const whole = await compactFiles({ ...common, output: 'tables/t/Cw.rf', nativeMerge: thenNative });
          const other = await compactFiles({ ...common, output: 'tables/t/Co.rf', nativeMerge: !thenNative });
          const written = await collect((await RFileReader.open(store, 'tables/t/Cw.rf')).scan());
          const stats = whole.output?.stats;
          expectConsistent(stats, written.length);
          expect(stats).toEqual(modelStats(written, await blockCounts(store, 'tables/t/Cw.rf')));
          if (merges.length > 1) expect(other.output?.stats).toEqual(stats);
          if (new Set(written.map((e) => e.key.family.toString('hex'))).size > MAX_FAMILIES) many++;

          const abort = new AbortController();
          let checkpoint: Checkpoint | undefined;
          let seen = 0;
          await compactFiles({
            ...common,
            output: 'tables/t/C1.rf',
            nativeMerge: firstNative,
            signal: abort.signal,
            checkpoints: {
              everyBytes: 1,
              everyMs: 60_000,
              onCheckpoint: (cp) => {
                checkpoint = cp;
                if (seen++ === killAfter) abort.abort(new Error('killed'));
              },
            },
          }).catch((err: unknown) => {
            if ((err as Error).message !== 'killed') throw err;
          });
          if (checkpoint === undefined) return;
          const resumed = await compactFiles({
            ...common,
            output: 'tables/t/C2.rf',
            nativeMerge: thenNative,
            resume: checkpoint,
          });
          expect(resumed.output?.stats).toEqual(stats);
        },
      ),
      { numRuns: runs(100) },
    );
    // Most files name fewer families than they hold: the rule, not exact counts, is what was checked.
    expect(many).toBeGreaterThan(runs(100) / 2);
  });
});
