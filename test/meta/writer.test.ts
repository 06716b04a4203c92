/**
 * The metadata writer thread, run from the compiled worker module (a worker thread cannot load the
 * TypeScript source).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkerWriter } from '../../src/meta/writer.js';
import { tempDir } from '../support/index.js';

const COMPILED_WORKER = new URL('../../dist/meta/write-worker.js', import.meta.url);

describe('metadata writer', () => {
  let dir: ReturnType<typeof tempDir>;

  beforeEach(() => {
    dir = tempDir('writer');
  });
  afterEach(() => {
    dir.cleanup();
  });

  it(
    'writer - a request once its thread is gone is refused at once, not left waiting',
    { timeout: 10_000 },
    async () => {
      const writer = new WorkerWriter(`${dir.path}/meta.sqlite`, COMPILED_WORKER);
      expect(await writer.takeOver()).toBe(1);
      expect(await writer.apply([{ puts: [{ row: 'r', col: 'c', value: 'v' }] }])).toEqual([
        { applied: true },
      ]);
      await writer.close();
      await expect(writer.apply([])).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    },
  );
});
