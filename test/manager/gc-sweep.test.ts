/**
 * The collector lists the object store for leftovers of crashes at most once per sweep interval, while
 * it collects replaced files (`~del` rows) on every cycle without listing; a cycle run on request
 * (`POST /v1/gc/run`) always sweeps. A real SQLite store and the in-memory object store, counting lists.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { GarbageCollector } from '../../src/manager/gc.js';
import { delRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { MemoryObjectStore } from '../../src/storage/memory.js';
import { tempDir } from '../support/index.js';

class CountingStore extends MemoryObjectStore {
  lists = 0;
  override list(prefix: string) {
    this.lists++;
    return super.list(prefix);
  }
}

describe('gc sweep interval', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  beforeEach(() => {
    dir = tempDir('gc-sweep');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  it('collects replaced files every cycle, lists the store once per sweep interval, and on request', async () => {
    const epoch = store.takeOver();
    const commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    const objects = new CountingStore();
    const gc = new GarbageCollector(
      new SqliteBackend(store),
      commits,
      objects,
      { graceMs: 0, intervalMs: 60_000, sweepIntervalMs: 3_600_000, epoch },
      silentLogger(),
    );
    const replaced = async (name: string) => {
      await objects.write(name, Buffer.from('x'));
      await commits.submit({ mutations: [{ puts: [{ row: delRow(name), col: 'at', value: '0' }] }] });
    };
    const names = async () => {
      const out: string[] = [];
      for await (const o of objects.list('tables/')) out.push(o.name);
      objects.lists--; // the test's own listing
      return out.sort();
    };

    // The first cycle sweeps: a leftover nothing references (and no ~del row names) goes.
    await objects.write('tables/0001/Ileftover1.rf', Buffer.from('x'));
    await replaced('tables/0001/Ireplaced1.rf');
    await gc.runCycle();
    expect(objects.lists).toBe(1);
    expect(await names()).toEqual([]);

    // Within the interval: replaced files are still collected, without listing; a leftover waits.
    await objects.write('tables/0001/Ileftover2.rf', Buffer.from('x'));
    await replaced('tables/0001/Ireplaced2.rf');
    await gc.runCycle();
    await gc.runCycle();
    expect(objects.lists).toBe(1);
    expect(await names()).toEqual(['tables/0001/Ileftover2.rf']);

    // On request, the cycle sweeps whenever the last sweep was.
    await gc.runCycle({ sweep: true });
    expect(objects.lists).toBe(2);
    expect(await names()).toEqual([]);
    expect(gc.stats.deleted).toBe(4);
    await gc.stop();
  });
});
