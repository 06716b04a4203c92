/**
 * Resume, don't redo (DESIGN.md, "Resume"): a compaction killed after any of its checkpoints and resumed
 * from it — once or twice, by fresh attempts writing under fresh names — produces byte for byte the file
 * an uninterrupted compaction of the same inputs produces, whatever the inputs, settings, codec, block and
 * index block sizes. The kill is real as far as the compaction can tell: its signal aborts right after the
 * checkpoint was handed out, so what the next attempt has is the parts and the checkpoint, nothing else.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  MemoryObjectStore,
  writeRFile,
  type Checkpoint,
  type IteratorSettings,
} from '../../src/storage/index.js';
import { fileArb, runs, settingsArb } from './arbitraries.js';

const caseArb = fc.record({
  files: fc.array(fileArb(60), { minLength: 1, maxLength: 4 }),
  settings: settingsArb,
  compression: fc.constantFrom(...COMPRESSIONS),
  blockSize: fc.integer({ min: 16, max: 160 }),
  indexBlockSize: fc.integer({ min: 16, max: 200 }),
  partBytes: fc.integer({ min: 1, max: 200 }),
  /** Which checkpoint each attempt is killed after (fewer attempts when there are fewer checkpoints). */
  kills: fc.array(fc.nat(3), { minLength: 1, maxLength: 2 }),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

async function play(c: Case): Promise<{ expected: Buffer | null; got: Buffer | null; resumed: number }> {
  const store = new MemoryObjectStore();
  const inputs: string[] = [];
  for (const [i, entries] of c.files.entries()) {
    inputs.push(`tables/t/I${i}.rf`);
    await writeRFile(store, inputs[i]!, entries, { blockSize: 64, compression: 'none' });
  }
  const settings: IteratorSettings = c.settings;
  const common = {
    store,
    inputs,
    settings,
    compression: c.compression,
    blockSize: c.blockSize,
    indexBlockSize: c.indexBlockSize,
  };
  const whole = await compactFiles({ ...common, output: 'tables/t/Cwhole.rf' });
  const expected = whole.empty ? null : await read(store, 'tables/t/Cwhole.rf');

  let resume: Checkpoint | undefined;
  let resumed = 0;
  for (const [attempt, killAfter] of [...c.kills, -1].entries()) {
    const output = `tables/t/C${attempt}.rf`;
    const abort = new AbortController();
    let seen = 0;
    try {
      const result = await compactFiles({
        ...common,
        output,
        signal: abort.signal,
        ...(resume ? { resume } : {}),
        checkpoints: {
          everyBytes: c.partBytes,
          everyMs: 60_000,
          onCheckpoint: (cp) => {
            if (seen++ === killAfter) {
              resume = cp;
              abort.abort(new Error('killed'));
            }
          },
        },
      });
      if (resume) resumed++;
      expect(result.resumedBytes).toBe(resume?.bytes ?? 0);
      return { expected, got: result.empty ? null : await read(store, output), resumed };
    } catch (err) {
      if (!abort.signal.aborted) throw err;
      // Killed: the next attempt starts from the checkpoint it was killed after.
    }
  }
  throw new Error('unreachable: the last attempt is never killed');
}

async function read(store: MemoryObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('compaction resume - property', () => {
  it('resume - a compaction killed after any checkpoint and resumed writes the same bytes', async () => {
    let resumedCases = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const { expected, got, resumed } = await play(c);
        if (resumed > 0) resumedCases++;
        expect(got === null ? null : got.toString('hex')).toBe(
          expected === null ? null : expected.toString('hex'),
        );
      }),
      { numRuns: runs(150) },
    );
    // The property must actually exercise resumes, not only uninterrupted runs.
    expect(resumedCases).toBeGreaterThan(20);
  });
});
