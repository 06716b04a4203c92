/**
 * Group commit against a real metadata store, in process (batches applied inline).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { MetaStore } from '../../src/meta/store.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { tempDir } from '../support/index.js';

describe('commit queue', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  let commits: CommitQueue;

  beforeEach(() => {
    dir = tempDir('commits');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  it('listeners - one that throws neither fails the batch nor keeps the others from hearing of it', async () => {
    const heard: string[][] = [];
    commits.onApplied(() => {
      throw new Error('store closed');
    });
    commits.onApplied(({ written }) => heard.push([...written]));

    const results = await commits.submit({ mutations: [{ puts: [{ row: 'r', col: 'c', value: 'v' }] }] });
    expect(results).toEqual([{ applied: true }]);
    expect(heard).toEqual([['r']]);
    // The next batch is applied as usual.
    await commits.submit({ mutations: [{ puts: [{ row: 's', col: 'c', value: 'v' }] }] });
    expect(heard).toEqual([['r'], ['s']]);
  });

  it('listeners hear every row an applied mutation changed, its columns, and which server sent it', async () => {
    const heard: unknown[] = [];
    commits.onApplied(({ changed }) => heard.push(changed));
    await commits.submit({ mutations: [{ puts: [{ row: 'r', col: 'a', value: 'v' }] }] });
    const fence = { server: 'ts-1', session: 'ffff' };
    const results = await commits.submit({
      fence,
      mutations: [
        {
          puts: [{ row: 'r', col: 'b', value: 'v' }],
          deletes: [{ row: 'r', col: 'a' }],
          deleteRows: ['s'],
        },
        // Not applied: its condition fails, and it is not heard of.
        { conditions: [{ op: 'present', row: 'x', col: 'c' }], puts: [{ row: 'x', col: 'c', value: 'v' }] },
      ],
    });
    expect(results.map((r) => r.applied)).toEqual([true, false]);
    expect(heard).toEqual([
      [{ row: 'r', cols: ['a'] }],
      [
        { row: 'r', cols: ['b', 'a'], origin: 'ts-1' },
        { row: 's', cols: ['*'], origin: 'ts-1' },
      ],
    ]);
  });
});
