import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { iteratorStack, MemoryObjectStore, scanFiles, writeRFile } from '../../src/storage/index.js';
import { collect, each } from '../support/entries.js';
import { fileArb, rangeArb, runs, settingsArb } from './arbitraries.js';
import { modelScan, show } from './model.js';

describe('iterator stack - against the model', () => {
  it('merge of random sorted sources through the stack equals the model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fileArb(), { maxLength: 6 }), settingsArb, async (files, settings) => {
        const got = await collect(iteratorStack(files.map(each), settings));
        expect(show(got)).toEqual(show(modelScan(files.flat(), settings)));
      }),
      { numRuns: runs(400) },
    );
  });

  it('scan of random RFiles (tiny blocks, both codecs) over a random row range equals the model', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fileArb(40), { minLength: 1, maxLength: 4 }),
        settingsArb,
        rangeArb,
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 200 }),
        fc.constantFrom('none' as const, 'deflate' as const),
        async (files, settings, range, blockSize, indexBlockSize, compression) => {
          const store = new MemoryObjectStore();
          const names = files.map((_, i) => `t/f${i}.rf`);
          for (const [i, entries] of files.entries()) {
            await writeRFile(store, names[i]!, entries, { blockSize, indexBlockSize, compression });
          }
          const got = await collect(scanFiles({ store, files: names, range, settings }));
          expect(show(got)).toEqual(show(modelScan(files.flat(), settings, range)));
        },
      ),
      { numRuns: runs(250) },
    );
  });

  it('the result does not depend on the order of the sources', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fileArb(), { minLength: 2, maxLength: 5 }),
        settingsArb,
        async (files, settings) => {
          const forward = await collect(iteratorStack(files.map(each), settings));
          const backward = await collect(iteratorStack([...files].reverse().map(each), settings));
          expect(show(backward)).toEqual(show(forward));
        },
      ),
      { numRuns: runs(150) },
    );
  });
});
