/**
 * The collector lists the object store for leftovers of crashes at most once per sweep interval, while
 * it collects replaced files (`~del` rows) on every cycle without listing; a cycle run on request
 * (`POST /v1/gc/run`) always sweeps. A real SQLite store and the in-memory object store, counting lists.
 * The sweep of the local store's temporary files stops as soon as the collector is fenced.
 */
import { mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { GarbageCollector } from '../../src/manager/gc.js';
import { delRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { LocalObjectStore } from '../../src/storage/local.js';
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

  it("gc - a collector fenced while it sweeps temporary files deletes none of them (they may be the successor's)", async () => {
    const epoch = store.takeOver();
    const commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    const root = join(dir.path, 'objects');
    const tablet = join(root, 'tables', '0001');
    mkdirSync(tablet, { recursive: true });
    // Temporaries older than the grace, of writes nothing the collector read names.
    const old = new Date(Date.now() - 60_000);
    for (const name of ['.Ia.rf.0123456789ab.tmp', '.Ib.rf.0123456789ab.tmp', '.Ic.rf.0123456789ab.tmp']) {
      writeFileSync(join(tablet, name), 'x');
      utimesSync(join(tablet, name), old, old);
    }
    // The successor takes the store over while the collector walks them.
    const successor = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    class Walked extends LocalObjectStore {
      override async *listTemporaries(prefix: string) {
        let first = true;
        for await (const t of super.listTemporaries(prefix)) {
          if (first) successor.takeOver();
          first = false;
          yield t;
        }
      }
    }
    const fenced: ExcError[] = [];
    const gc = new GarbageCollector(
      new SqliteBackend(store),
      commits,
      new Walked(root),
      { graceMs: 1_000, intervalMs: 60_000, epoch },
      silentLogger(),
      (err) => fenced.push(err),
    );
    try {
      await gc.runCycle({ sweep: true });
      expect(readdirSync(tablet)).toHaveLength(3);
      expect(fenced.map((e) => e.code)).toEqual(['NOT_MANAGER']);
    } finally {
      await gc.stop();
      successor.close();
    }
  });
});
