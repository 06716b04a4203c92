/**
 * The manager's tables API against a real metadata store, in process (group commit applied inline).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { Tables } from '../../src/manager/tables.js';
import { ALL_TABLETS, DEL_PREFIX, queueRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { COL_LOC, fileCol, locationValue, queuedCol } from '../../src/meta/tablet.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { tempDir } from '../support/index.js';

describe('tables', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  let tables: Tables;
  /** What checking a config's queues does: replaced by tests that need it to take time. */
  let checkQueues: () => Promise<void>;

  beforeEach(() => {
    dir = tempDir('tables');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    const commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    checkQueues = async () => undefined;
    tables = new Tables(new SqliteBackend(store), commits, () => checkQueues(), silentLogger());
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  it('configure - a change committed while another is checking its queues is not overwritten', async () => {
    await tables.create({ name: 't' });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    checkQueues = () => {
      checkQueues = async () => undefined; // only the first configure waits
      return held;
    };
    const slow = tables.configure('t', { versions: 5 });
    await tables.configure('t', { ttlMs: 60_000 });
    release();
    await slow;
    expect((await tables.get('t')).config).toMatchObject({ versions: 5, ttlMs: 60_000 });
  });

  it('delete - takes the tablets from their server, removes them with their queue entries, records their files', async () => {
    const doomed = await tables.create({ name: 'doomed', splits: ['m'] });
    const kept = await tables.create({ name: 'kept' });
    const tablets = [...(await tables.tablets(doomed.id)), ...(await tables.tablets(kept.id))];
    for (const t of tablets) {
      const entry = queueRow({ queueId: 'q000', bin: 0, priority: 1, tableId: t.tableId, endRow: t.endRow });
      store.mutate({
        puts: [
          { row: t.row, col: fileCol(`tables/${t.tableId}/${t.row}.rf`), value: '{"size":1,"entries":1}' },
          { row: t.row, col: queuedCol('q000'), value: entry },
          { row: entry, col: 'tablet', value: JSON.stringify({ tablet: t.row, at: 0 }) },
        ],
      });
    }
    const hostedRow = tablets[0]!.row;
    store.mutate({
      puts: [
        {
          row: hostedRow,
          col: COL_LOC,
          value: locationValue({ server: 'ts1', session: '0123456789abcdef' }),
        },
      ],
    });
    const unloaded: string[][] = [];

    await tables.delete('doomed', async (server, tablet) => {
      unloaded.push([server, tablet]);
    });

    expect(unloaded).toEqual([['ts1', hostedRow]]);
    expect((await tables.list()).map((t) => t.name)).toEqual(['kept']);
    const rows = (request: Parameters<MetaStore['scanRows']>[0]) =>
      [...store.scanRows(request)].map((r) => r.row);
    const keptTablets = await tables.tablets(kept.id);
    expect(rows(ALL_TABLETS)).toEqual(keptTablets.map((t) => t.row));
    expect(rows({ prefix: '~cq:' })).toEqual(keptTablets.map((t) => t.queued.get('q000')));
    const doomedFiles = tablets
      .filter((t) => t.tableId === doomed.id)
      .map((t) => `${DEL_PREFIX}tables/${t.tableId}/${t.row}.rf`);
    expect(rows({ prefix: DEL_PREFIX })).toEqual(doomedFiles.sort());
  });
});
