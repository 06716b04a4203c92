/**
 * Invariants 1 and 6 at the storage layer: whatever sequence of partial compactions (any subset of a
 * tablet's files, delete markers kept) and full compactions (all files, markers dropped), interleaved
 * with new writes and the clock moving on, a scan of the current files equals the model's scan of what
 * was written. Nothing deleted comes back, nothing live is lost.
 *
 * The model's tablet is the multiset of entries written. A partial compaction must not change what a
 * scan sees, so it does not touch the model at all. A full compaction applies the rules and forgets the
 * delete markers, so the model's tablet becomes the model's scan at that moment: a put written *later*
 * with a timestamp at or below a forgotten marker is visible (Accumulo behaves the same; timestamps
 * assigned at ingest are never older than an earlier delete).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compactFiles,
  MemoryObjectStore,
  scanFiles,
  writeRFile,
  type Entry,
  type FilterSpec,
} from '../../src/storage/index.js';
import { collect } from '../support/entries.js';
import { entryArb, filtersArb, runs, sorted } from './arbitraries.js';
import { modelScan, show } from './model.js';

type Step =
  | { kind: 'write'; entries: Entry[] }
  | { kind: 'partial'; pick: number[] }
  | { kind: 'full' }
  | { kind: 'tick'; ms: number };

interface Table {
  versions: number;
  ttlMs: number | undefined;
  filters: FilterSpec[];
}

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      entries: fc.array(entryArb, { minLength: 1, maxLength: 12 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('partial' as const),
      pick: fc.uniqueArray(fc.nat(7), { minLength: 1, maxLength: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('full' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 8 }) }),
  },
);

const tableArb: fc.Arbitrary<Table> = fc.record({
  versions: fc.integer({ min: 1, max: 3 }),
  ttlMs: fc.option(fc.integer({ min: 0, max: 25 }), { nil: undefined }),
  filters: fc.oneof(
    { weight: 3, arbitrary: fc.constant<FilterSpec[]>([]) },
    { weight: 1, arbitrary: filtersArb },
  ),
});

/**
 * Plays `steps` on one tablet's files and checks the scan after each. `partialDropsDeletes` plays a
 * broken compactor that drops delete markers in partial compactions (the mutant the test must catch).
 */
async function play(table: Table, steps: Step[], partialDropsDeletes = false): Promise<void> {
  const store = new MemoryObjectStore();
  let files: string[] = [];
  /** The model's tablet: every entry written, and after a full compaction the model's scan of them. */
  let tablet: Entry[] = [];
  let now = 20;
  let seq = 0;
  const settings = (dropDeletes: boolean) => ({ ...table, nowMs: now, dropDeletes });

  const compact = async (inputs: string[], dropDeletes: boolean): Promise<void> => {
    const output = `t/c${seq++}.rf`;
    const result = await compactFiles({
      store,
      inputs,
      output,
      settings: settings(dropDeletes),
      blockSize: 48,
    });
    files = files.filter((f) => !inputs.includes(f));
    if (!result.empty) files.push(output);
    else expect(await store.stat(output)).toBeNull();
    for (const f of inputs) await store.delete(f);
  };

  for (const [i, step] of steps.entries()) {
    if (step.kind === 'write') {
      const name = `t/w${seq++}.rf`;
      await writeRFile(store, name, sorted(step.entries), { blockSize: 48 });
      files.push(name);
      tablet.push(...step.entries);
    } else if (step.kind === 'partial' && files.length > 0) {
      const inputs = [...new Set(step.pick.map((p) => files[p % files.length]!))];
      await compact(inputs, partialDropsDeletes);
    } else if (step.kind === 'full' && files.length > 0) {
      await compact([...files], true);
      tablet = modelScan(tablet, settings(true));
    } else if (step.kind === 'tick') {
      now += step.ms;
    }
    const got = await collect(scanFiles({ store, files, settings: settings(true) }));
    expect(show(got), `after step ${i} (${step.kind}), files ${files.join(', ')}`).toEqual(
      show(modelScan(tablet, settings(true))),
    );
  }
}

describe('compaction sequences - invariants 1 and 6', () => {
  it('any sequence of partial and full compactions never resurrects deleted data or loses live data', async () => {
    await fc.assert(
      fc.asyncProperty(
        tableArb,
        fc.array(stepArb, { minLength: 1, maxLength: 30, size: 'medium' }),
        (table, steps) => play(table, steps),
      ),
      { numRuns: runs(300) },
    );
  });

  it('the property has teeth: a compactor that drops delete markers in partial compactions is caught', async () => {
    const result = await fc.check(
      fc.asyncProperty(
        tableArb,
        fc.array(stepArb, { minLength: 1, maxLength: 30, size: 'medium' }),
        (table, steps) => play(table, steps, true),
      ),
      { numRuns: runs(300), seed: 42 },
    );
    expect(result.failed).toBe(true);
    // Shrinking finds the classic: a put, a newer delete in another file, a partial compaction of the
    // delete's file alone, and the put is back.
    const [, steps] = result.counterexample!;
    expect(steps.length).toBeLessThanOrEqual(4);
  });

  it('example - a partial compaction keeps the delete marker that hides a put in another file', async () => {
    const put: Entry = {
      key: {
        row: Buffer.from('r'),
        family: Buffer.from('f'),
        qualifier: Buffer.from('q'),
        timestamp: 1,
        deleted: false,
      },
      value: Buffer.from('v'),
    };
    const del: Entry = { key: { ...put.key, timestamp: 2, deleted: true }, value: Buffer.alloc(0) };
    await play({ versions: 1, ttlMs: undefined, filters: [] }, [
      { kind: 'write', entries: [put] },
      { kind: 'write', entries: [del] },
      { kind: 'partial', pick: [1] },
      { kind: 'full' },
    ]);
  });
});
