/**
 * One garbage file the object store refuses to delete (a file the manager may not remove, an S3
 * AccessDenied) fails only itself: the collector deletes the other files of the cycle, trims outcome
 * rows, and keeps the refused file's claimed mark for a later cycle. A real SQLite store and the
 * in-memory object store.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { ExcError } from '../../src/errors.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { GarbageCollector } from '../../src/manager/gc.js';
import { scanRows } from '../../src/meta/backend.js';
import { delRow } from '../../src/meta/keys.js';
import { DONE_PREFIX } from '../../src/meta/outcomes.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { MemoryObjectStore } from '../../src/storage/memory.js';
import { tempDir } from '../support/index.js';

/** Refuses to delete one file, as the local store does on EACCES. */
class RefusingStore extends MemoryObjectStore {
  constructor(private readonly refused: string) {
    super();
  }
  override async delete(name: string): Promise<void> {
    if (name === this.refused) {
      throw new ExcError('INTERNAL', `local store: delete ${name} failed (EACCES)`, {
        details: { name, code: 'EACCES' },
      });
    }
    return super.delete(name);
  }
}

describe('gc - a delete the store refuses', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  beforeEach(() => {
    dir = tempDir('gc-delete-failure');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  it('gc - one file that cannot be deleted fails only itself: the others are deleted and outcomes trimmed', async () => {
    const epoch = store.takeOver();
    const commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      name: 'test',
      level: 'warn',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    });
    // The file that sorts first is the one refused: a collector that stops at the first failure never
    // reaches the second.
    const [bad, good] = ['tables/0001/Ia.rf', 'tables/0001/Ib.rf'];
    const objects = new RefusingStore(bad);
    for (const name of [bad, good]) {
      await objects.write(name, Buffer.from('x'));
      await commits.submit({ mutations: [{ puts: [{ row: delRow(name), col: 'at', value: '0' }] }] });
    }
    const old = [1, 2, 3].map(() => `${DONE_PREFIX}${ulid(Date.now() - 3_600_000)}`);
    await commits.submit({
      mutations: old.map((row) => ({ puts: [{ row, col: 'outcome', value: '{}' }] })),
    });
    const backend = new SqliteBackend(store);
    const rows = async (prefix: string) => {
      const out: string[] = [];
      for await (const r of scanRows(backend, { prefix })) out.push(r.row);
      return out;
    };
    const gc = new GarbageCollector(
      backend,
      commits,
      objects,
      { graceMs: 1_000, intervalMs: 60_000, outcomeRetentionMs: 60_000, concurrency: 1, epoch },
      log,
    );
    try {
      await gc.runCycle();
      const left: string[] = [];
      for await (const o of objects.list('tables/')) left.push(o.name);
      expect(left).toEqual([bad]);
      expect(await rows(DONE_PREFIX)).toEqual([]);
      // The refused file keeps its (claimed) mark; the deleted one's is gone.
      expect(await rows('~del:')).toEqual([delRow(bad)]);
      expect(gc.stats).toMatchObject({ cycles: 1, deleted: 1, failedDeletes: 1 });
      expect(gc.stats.lastError).toBeUndefined();
      expect(lines.find((l) => l.file === bad)).toMatchObject({ code: 'EACCES', level: 40 });
    } finally {
      await gc.stop();
    }
  });
});
