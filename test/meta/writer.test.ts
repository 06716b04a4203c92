/**
 * The metadata writer thread, run from the compiled worker module (a worker thread cannot load the
 * TypeScript source).
 */
import Database from 'better-sqlite3';
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

  it(
    'takeover - waits while another process holds the write lock (a paused manager), then fences it',
    { timeout: 20_000 },
    async () => {
      const path = `${dir.path}/meta.sqlite`;
      const old = new WorkerWriter(path, COMPILED_WORKER, { busyTimeoutMs: 100 });
      expect(await old.takeOver()).toBe(1);
      await old.close();
      // A manager frozen in the middle of a write transaction keeps SQLite's write lock.
      const frozen = new Database(path);
      frozen.exec('BEGIN IMMEDIATE');
      const writer = new WorkerWriter(path, COMPILED_WORKER, { busyTimeoutMs: 100 });
      const refusals: string[] = [];
      const epoch = writer.takeOver({ onLocked: (err) => refusals.push(err.code) });
      await new Promise((r) => setTimeout(r, 1_500));
      expect(refusals.length).toBeGreaterThan(1);
      expect(new Set(refusals)).toEqual(new Set(['UNAVAILABLE']));
      frozen.exec('COMMIT');
      frozen.close();
      expect(await epoch).toBe(2);
      await writer.close();
    },
  );

  it('takeover - a wait for the lock ends when its signal aborts', { timeout: 20_000 }, async () => {
    const path = `${dir.path}/meta.sqlite`;
    const frozen = new Database(path);
    frozen.pragma('journal_mode = WAL');
    frozen.exec(
      'CREATE TABLE IF NOT EXISTS cells (row TEXT NOT NULL, col TEXT NOT NULL, val TEXT NOT NULL, PRIMARY KEY (row, col)) WITHOUT ROWID',
    );
    frozen.exec('BEGIN IMMEDIATE');
    const writer = new WorkerWriter(path, COMPILED_WORKER, { busyTimeoutMs: 100 });
    const abort = new AbortController();
    const epoch = writer.takeOver({ signal: abort.signal });
    setTimeout(() => abort.abort(new Error('stopping')), 500);
    await expect(epoch).rejects.toThrow('stopping');
    frozen.exec('ROLLBACK');
    frozen.close();
    await writer.close();
  });
});
