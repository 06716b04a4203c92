/**
 * The manager's tables API against a real metadata store, in process (group commit applied inline).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { Tables } from '../../src/manager/tables.js';
import { MetaStore } from '../../src/meta/store.js';
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
    tables = new Tables(store, commits, () => checkQueues(), silentLogger());
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
    expect(tables.get('t').config).toMatchObject({ versions: 5, ttlMs: 60_000 });
  });
});
