/**
 * Creating a big table against a real metadata store, in process: its tablets are written in batches,
 * and the table is there whole or not at all — not listed, not found by name while they are written;
 * removed when it cannot finish, or by the next manager when the one creating it died.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { BATCH_TABLETS, TableCreator } from '../../src/manager/table-create.js';
import { Tables } from '../../src/manager/tables.js';
import { tableRange, tableRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { tempDir } from '../support/index.js';

const splits = (n: number) => Array.from({ length: n }, (_, i) => `r${String(i).padStart(6, '0')}`);

describe('creating a big table', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  let backend: SqliteBackend;
  let commits: CommitQueue;
  let tables: Tables;
  /** Submissions made; the one numbered `stallAt` waits for `release`. */
  let submitted: number;
  let stallAt: number;
  let release: () => void;
  let stalled: Promise<void>;
  let reached: () => void;
  let gated: CommitQueue;

  beforeEach(() => {
    dir = tempDir('table-create');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    backend = new SqliteBackend(store);
    commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    tables = new Tables(backend, commits, async () => undefined, silentLogger());
    submitted = 0;
    stallAt = Infinity;
    stalled = new Promise<void>((r) => (reached = r));
    const gate = new Promise<void>((r) => (release = r));
    gated = {
      submit: async (sub: Parameters<CommitQueue['submit']>[0]) => {
        if (++submitted === stallAt) {
          reached();
          await gate;
        }
        return commits.submit(sub);
      },
    } as unknown as CommitQueue;
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  const rowsOf = async (id: string) => {
    const range = tableRange(id);
    return backend.count(range.start, range.end);
  };

  it('is written in batches and appears whole: invisible until its last mutation', async () => {
    const creator = new TableCreator(backend, gated, async () => undefined, silentLogger());
    const n = BATCH_TABLETS * 2 + 10;
    stallAt = 3; // the id, one batch of tablets, then this: the second batch
    const creating = creator.create({ name: 'big', splits: splits(n) }, 'req-1');
    await stalled;
    expect(await tables.list()).toEqual([]);
    await expect(tables.get('big')).rejects.toMatchObject({ code: 'UNKNOWN_TABLE' });
    expect(store.get(tableRow('0001'), 'state')).toBe('creating');
    release();
    const info = await creating;
    expect(submitted).toBe(5); // the id, three batches, the name
    expect(await tables.get('big')).toMatchObject({ id: info.id, state: 'online' });
    const tablets = await tables.tablets(info.id);
    expect(tablets).toHaveLength(n + 1);
    // Each tablet starts where the one before it ends.
    tablets.forEach((t, i) => expect(t.prevEndRow).toEqual(i === 0 ? null : tablets[i - 1]!.endRow));
    // A repeat of the request is answered the same, and creates nothing.
    expect(await creator.create({ name: 'big', splits: splits(n) }, 'req-1')).toEqual(info);
    expect((await tables.list()).map((t) => t.name)).toEqual(['big']);
  });

  it('of two creations of one name, one wins; the other is refused and leaves nothing', async () => {
    const creator = new TableCreator(backend, gated, async () => undefined, silentLogger());
    stallAt = 2; // the first creation waits before its tablets
    const first = creator.create({ name: 'big', splits: splits(BATCH_TABLETS + 1) });
    await stalled;
    const second = await tables.create({ name: 'big', splits: splits(BATCH_TABLETS + 1) });
    release();
    await expect(first).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(second.id).toBe('0002');
    expect(await rowsOf('0001')).toBe(0);
    expect(store.row(tableRow('0001')).size).toBe(0);
    expect(await rowsOf('0002')).toBe(BATCH_TABLETS + 2);
  });

  it('one whose manager died is removed by the next, and the name is free again', async () => {
    const dying = new TableCreator(backend, gated, async () => undefined, silentLogger());
    stallAt = 3;
    void dying.create({ name: 'big', splits: splits(BATCH_TABLETS * 2) });
    await stalled; // never released: the manager is gone
    expect(await rowsOf('0001')).toBe(BATCH_TABLETS);
    await tables.abandonCreations();
    expect(await rowsOf('0001')).toBe(0);
    expect(store.row(tableRow('0001')).size).toBe(0);
    const again = await tables.create({ name: 'big', splits: ['m'] });
    expect(await tables.tablets(again.id)).toHaveLength(2);
  });
});
