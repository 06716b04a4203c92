/**
 * Split jobs (DESIGN.md, "Split jobs"): the rows splitRows chooses cut the inputs into ranges, and the
 * sub-job compactions of those ranges hold, together, exactly the entries one compaction of the whole job
 * writes — whatever the inputs (versions, delete markers, explicit timestamps), settings, codec and
 * number of parts. A range never cuts a row, so each cell's versions and deletes are decided by one
 * sub-job.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  MemoryObjectStore,
  RFileReader,
  splitRows,
  writeRFile,
  type Entry,
  type ObjectStore,
} from '../../src/storage/index.js';
import { boundsAt } from '../../src/storage/split-rows.js';
import { fileArb, runs, settingsArb } from './arbitraries.js';

async function entries(store: ObjectStore, name: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const e of (await RFileReader.open(store, name)).scan()) out.push(e);
  return out;
}

const show = (es: Entry[]) =>
  es.map(
    (e) =>
      `${Buffer.from(e.key.row).toString('hex')} ${JSON.stringify(e.key)} ${Buffer.from(e.value).toString('hex')}`,
  );

describe('split jobs - property', () => {
  it('split - the sub-jobs of a split write together exactly the entries of the whole compaction', async () => {
    let splitCases = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          files: fc.array(fileArb(80), { minLength: 1, maxLength: 4 }),
          settings: settingsArb,
          compression: fc.constantFrom(...COMPRESSIONS),
          parts: fc.integer({ min: 2, max: 6 }),
        }),
        async (c) => {
          const store = new MemoryObjectStore();
          const inputs: string[] = [];
          for (const [i, es] of c.files.entries()) {
            inputs.push(`tables/t/I${i}.rf`);
            await writeRFile(store, inputs[i]!, es, { blockSize: 48, compression: 'none' });
          }
          const common = { store, inputs, settings: c.settings, compression: c.compression };
          const whole = await compactFiles({ ...common, output: 'tables/t/Cwhole.rf' });
          const expected = whole.empty ? [] : await entries(store, 'tables/t/Cwhole.rf');

          const bounds = await splitRows(store, inputs, c.parts);
          expect(bounds.length).toBeLessThan(c.parts);
          expect([...bounds].sort()).toEqual(bounds);
          expect(new Set(bounds).size).toBe(bounds.length);
          if (bounds.length > 0) splitCases++;
          const got: Entry[] = [];
          for (let i = 0; i <= bounds.length; i++) {
            const range = {
              ...(i > 0 ? { start: bounds[i - 1] } : {}),
              ...(i < bounds.length ? { end: bounds[i] } : {}),
            };
            const output = `tables/t/C${i}.rf`;
            const part = await compactFiles({ ...common, output, range });
            if (!part.empty) got.push(...(await entries(store, output)));
          }
          expect(show(got)).toEqual(show(expected));
          await store.close();
        },
      ),
      { numRuns: runs(150) },
    );
    // The property must exercise real splits, not only inputs too small to split.
    expect(splitCases).toBeGreaterThan(runs(150) / 4);
  });
});

describe('split bounds', () => {
  const block = (row: string, bytes: number) => ({ row: Buffer.from(row), bytes });

  it('split bounds - cut the blocks into shares of about equal bytes, right after a block', () => {
    const marks = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((r) => block(r, 100));
    const bounds = boundsAt(marks, 4).map((b) => b.toString('latin1'));
    expect(bounds).toEqual(['b\x00', 'd\x00', 'f\x00']);
  });

  it('split bounds - follow the bytes, not the number of blocks', () => {
    const marks = [block('a', 700), block('b', 100), block('c', 100), block('d', 100)];
    expect(boundsAt(marks, 2).map((b) => b.toString('latin1'))).toEqual(['a\x00']);
  });

  it('split bounds - fewer or none when the inputs have too few distinct rows', () => {
    expect(boundsAt([block('a', 100)], 4)).toEqual([]);
    expect(boundsAt([block('a', 100), block('a', 100), block('a', 100)], 3)).toEqual([]);
    expect(boundsAt([block('a', 100), block('b', 100)], 8).map((b) => b.toString('latin1'))).toEqual([
      'a\x00',
    ]);
  });
});
