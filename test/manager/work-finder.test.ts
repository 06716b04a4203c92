/**
 * Finding work for compactors against a real metadata store, in process (group commit applied inline).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { WorkFinder } from '../../src/manager/work-finder.js';
import { queueRow, tabletRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { COL_LOC, locationValue } from '../../src/meta/tablet.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { tempDir } from '../support/index.js';

const BINS = 64;
const LOCATION = { server: 'ts1', session: '0123456789abcdef' };

describe('work finder', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  let commits: CommitQueue;
  let work: WorkFinder;
  const never = new AbortController().signal;

  beforeEach(() => {
    dir = tempDir('work');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
    work = new WorkFinder(new SqliteBackend(store), commits);
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  /** A queue entry for tablet `end` of table t000, hosted or not. */
  function entry(end: string, priority: number, hosted: boolean) {
    const endRow = Buffer.from(end);
    const row = queueRow({ queueId: 'q000', bin: 5, priority, tableId: 't000', endRow });
    const tablet = tabletRow('t000', endRow);
    return {
      row,
      tablet,
      puts: [
        { row, col: 'tablet', value: JSON.stringify({ tablet, at: 0 }) },
        ...(hosted ? [{ row: tablet, col: COL_LOC, value: locationValue(LOCATION) }] : []),
      ],
    };
  }

  it('next - the highest-priority entry of a hosted tablet; none in an empty queue', async () => {
    expect(await work.next('q000', 0, BINS, 0, never)).toBeNull();
    const unhosted = entry('a', 9, false);
    const hosted = entry('b', 5, true);
    store.mutate({ puts: [...unhosted.puts, ...hosted.puts] });
    expect(await work.next('q000', 0, BINS, 0, never)).toEqual({
      entry: hosted.row,
      tablet: hosted.tablet,
      priority: 5,
      location: LOCATION,
      queuedAt: 0,
    });
    expect(await work.next('q001', 0, BINS, 0, never)).toBeNull();
  });

  it('next - a long poll on an empty queue is answered by the entry committed while it waits', async () => {
    const waiting = work.next('q000', 0, BINS, 30_000, never);
    const later = entry('c', 1, true);
    await commits.submit({ mutations: [{ puts: later.puts }] });
    expect((await waiting)?.entry).toBe(later.row);
  });
});
