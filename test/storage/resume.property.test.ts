/**
 * Resume, don't redo (DESIGN.md, "Resume"): a compaction killed after any of its checkpoints and resumed
 * from it — once or twice, by fresh attempts writing under fresh names — produces byte for byte the file
 * an uninterrupted compaction of the same inputs produces, and reports the same summary (its stats too),
 * whatever the inputs, settings, codec, block and index block sizes. The kill is real as far as the compaction can tell: its signal aborts right after the
 * checkpoint was handed out, so what the next attempt has is the parts and the checkpoint, nothing else.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  compactFiles,
  LocalObjectStore,
  MemoryObjectStore,
  type ObjectStore,
  writeRFile,
  type Checkpoint,
  type FileSummary,
  type IteratorSettings,
} from '../../src/storage/index.js';
import { fileArb, runs, settingsArb } from './arbitraries.js';

const caseArb = fc.record({
  files: fc.array(fileArb(60), { minLength: 1, maxLength: 4 }),
  settings: settingsArb,
  compression: fc.constantFrom(...COMPRESSIONS),
  blockSize: fc.integer({ min: 16, max: 160 }),
  indexBlockSize: fc.integer({ min: 16, max: 200 }),
  partBytes: fc.integer({ min: 1, max: 80 }),
  /** Which checkpoint each attempt is killed after (fewer attempts when there are fewer checkpoints). */
  kills: fc.array(fc.nat(2), { minLength: 1, maxLength: 2 }),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

async function play(
  c: Case,
  store: ObjectStore,
): Promise<{
  expected: Buffer | null;
  got: Buffer | null;
  resumed: number;
  summaries: [FileSummary | null, FileSummary | null];
}> {
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
            // The local store appends in place (one file per attempt); the others write parts.
            const named = store.openAppendable ? /\.partial$/ : /\.part\d{5}$/;
            if (!cp.parts.every((p) => named.test(p.name)))
              throw new Error(`unexpected parts ${cp.parts[0]?.name}`);
            if (seen++ === killAfter) {
              resume = cp;
              abort.abort(new Error('killed'));
            }
          },
        },
      });
      if (resume) resumed++;
      expect(result.resumedBytes).toBe(resume?.bytes ?? 0);
      return {
        expected,
        got: result.empty ? null : await read(store, output),
        resumed,
        summaries: [whole.output, result.output],
      };
    } catch (err) {
      if (!abort.signal.aborted) throw err;
      // Killed: the next attempt starts from the checkpoint it was killed after.
    }
  }
  throw new Error('unreachable: the last attempt is never killed');
}

async function read(store: ObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('compaction resume - property', () => {
  // The memory store writes parts and composes them (as S3 does); the local store appends in place.
  for (const [kind, numRuns, open] of [
    ['parts (memory store)', runs(150), () => new MemoryObjectStore()],
    [
      'in place (local store)',
      runs(40),
      () => new LocalObjectStore(mkdtempSync(join(tmpdir(), 'exc-resume-'))),
    ],
  ] as const) {
    it(`resume - a compaction killed after any checkpoint and resumed writes the same bytes: ${kind}`, async () => {
      let resumedCases = 0;
      const stores: ObjectStore[] = [];
      try {
        await fc.assert(
          fc.asyncProperty(caseArb, async (c) => {
            const store = open();
            stores.push(store);
            const { expected, got, resumed, summaries } = await play(c, store);
            if (resumed > 0) resumedCases++;
            expect(got === null ? null : got.toString('hex')).toBe(
              expected === null ? null : expected.toString('hex'),
            );
            const [whole, resumedSummary] = summaries;
            // Counted over the placed blocks only: those a resumed run writes again are not counted twice.
            expect(resumedSummary?.stats).toEqual(whole?.stats);
            expect(resumedSummary).toEqual(whole);
            if (whole !== null) expect(whole.stats).toBeDefined();
          }),
          { numRuns },
        );
      } finally {
        for (const store of stores) {
          await store.close();
          if (store instanceof LocalObjectStore) rmSync(store.root, { recursive: true, force: true });
        }
      }
      // The property must actually exercise resumes, not only uninterrupted runs.
      // (About a third of the cases resume; this bound fails by chance about once in 10,000 runs.)
      expect(resumedCases).toBeGreaterThanOrEqual(Math.ceil(numRuns / 16));
    });
  }

  for (const [kind, open] of [
    ['parts (memory store)', () => new MemoryObjectStore()],
    ['in place (local store)', () => new LocalObjectStore(mkdtempSync(join(tmpdir(), 'exc-zombie-')))],
  ] as const)
    it(`resume - a zombie that goes on after its job was resumed writes nothing the new owner reads or commits: ${kind}`, async () => {
      const store: ObjectStore = open();
      const entries = Array.from({ length: 3_000 }, (_, i) => ({
        key: {
          row: Buffer.from(`r${String(i).padStart(5, '0')}`),
          family: Buffer.from('f'),
          qualifier: Buffer.from('q'),
          timestamp: 1,
          deleted: false,
        },
        value: Buffer.from(`v${i}`),
      }));
      await writeRFile(store, 'tables/t/I0.rf', entries);
      const writes: { name: string; by: string }[] = [];
      const recording = (by: string): ObjectStore =>
        new Proxy(store, {
          get(target, prop, receiver) {
            if (prop === 'write' || prop === 'openAppendable') {
              const fn = Reflect.get(target, prop, receiver) as ((...a: unknown[]) => unknown) | undefined;
              return (
                fn &&
                ((name: string, ...rest: unknown[]) => {
                  writes.push({ name, by });
                  return fn.call(target, name, ...rest);
                })
              );
            }
            return Reflect.get(target, prop, receiver) as unknown;
          },
        });
      const common = {
        inputs: ['tables/t/I0.rf'],
        settings: { versions: 1, nowMs: 0, filters: [], dropDeletes: true },
        blockSize: 1_024,
      };
      const expected = await compactFiles({ ...common, store, output: 'tables/t/Cwhole.rf' });

      // The first attempt hands out a checkpoint and, presumed dead, goes on anyway (a zombie), while the
      // job is resumed by another attempt under its own output name.
      let checkpoint: Checkpoint | undefined;
      let checkpointed: () => void = () => undefined;
      const first = new Promise<void>((r) => (checkpointed = r));
      const zombie = compactFiles({
        ...common,
        store: recording('zombie'),
        output: 'tables/t/C1.rf',
        checkpoints: {
          everyBytes: 4_000,
          everyMs: 60_000,
          onCheckpoint: (cp) => {
            checkpoint ??= cp;
            checkpointed();
          },
        },
      });
      await first;
      const owner = compactFiles({
        ...common,
        store: recording('owner'),
        output: 'tables/t/C2.rf',
        resume: checkpoint!,
        checkpoints: { everyBytes: 4_000, everyMs: 60_000 },
      });
      const [, resumed] = await Promise.all([zombie, owner]);
      const zombieWrites = writes.filter((w) => w.by === 'zombie').map((w) => w.name);
      const ownerWrites = writes.filter((w) => w.by === 'owner').map((w) => w.name);
      // No object is written by both; the parts the owner reads were written once, by the first attempt.
      expect(ownerWrites.filter((n) => zombieWrites.includes(n))).toEqual([]);
      expect(ownerWrites.every((n) => n.startsWith('tables/t/C2.rf'))).toBe(true);
      expect(zombieWrites.every((n) => n.startsWith('tables/t/C1.rf'))).toBe(true);
      for (const p of checkpoint!.parts) expect(zombieWrites.filter((n) => n === p.name)).toHaveLength(1);
      expect(resumed.resumedBytes).toBe(checkpoint!.bytes);
      const got = await read(store, 'tables/t/C2.rf');
      expect(got.equals(await read(store, 'tables/t/Cwhole.rf'))).toBe(true);
      expect(got.length).toBe(expected.output?.size);
      await store.close();
      if (store instanceof LocalObjectStore) rmSync(store.root, { recursive: true, force: true });
    });
});
