/**
 * The stats a file's summary reports (FileStats: delete markers, oldest and newest timestamp) across
 * checkpoints: a checkpoint records those of the blocks placed before it, not of blocks still being
 * deflated or filled (a resumed run writes those again); its state carries them, and a state of an older
 * version, without them, still resumes, to a file whose summary has none.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  makeEntry,
  MemoryObjectStore,
  RFileEncoder,
  writeRFile,
  type Checkpoint,
  type Entry,
} from '../../src/storage/index.js';
import {
  decodeEncoderState,
  encodeEncoderState,
  type EncoderState,
} from '../../src/storage/rfile/encoder-state.js';
import { fileArb, runs } from './arbitraries.js';
import { modelStats } from './model.js';

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
    for (const stats of [
      { deletes: 1, oldestTs: 9, newestTs: 8 },
      { deletes: -1, oldestTs: 1, newestTs: 2 },
      { deletes: 1, oldestTs: 1.5, newestTs: 2 },
      { deletes: 1, oldestTs: 1 },
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
