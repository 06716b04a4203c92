/**
 * The local store makes the directories it creates durable: a new directory is an entry in its parent,
 * lost on a power failure unless that parent is synced, and with it every file inside. Directory syncs are
 * observed by wrapping `open` of node:fs/promises: a directory is synced through a handle opened on it.
 */
import { statSync } from 'node:fs';
import type * as FsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LocalObjectStore } from '../../src/storage/local.js';
import { tempDir } from '../support/index.js';

const synced: string[] = [];

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof FsPromises>();
  const open: typeof fs.open = async (...args) => {
    const fh = await fs.open(...args);
    const path = String(args[0]);
    const sync = fh.sync.bind(fh);
    fh.sync = async () => {
      await sync();
      if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) synced.push(path);
    };
    return fh;
  };
  return { ...fs, default: { ...fs, open }, open };
});

describe('local store - durable directories', () => {
  let dir: ReturnType<typeof tempDir>;
  let root: string;
  beforeEach(() => {
    dir = tempDir('local-durable');
    root = join(dir.path, 'objects');
    synced.length = 0;
  });
  afterEach(() => dir.cleanup());

  it('local store - a write that creates directories syncs the parent of each, up to the root', async () => {
    const store = new LocalObjectStore(root);
    await store.write('tables/7/a', Buffer.from('x'));
    // The root was made too: its parent holds its entry.
    expect(synced.sort()).toEqual([dir.path, root, join(root, 'tables'), join(root, 'tables', '7')].sort());

    // A write into directories that exist syncs only its own directory (the rename), as before.
    synced.length = 0;
    await store.write('tables/7/b', Buffer.from('x'));
    expect(synced).toEqual([join(root, 'tables', '7')]);

    // A new tablet directory in an existing table directory: tables/ gets the new entry.
    synced.length = 0;
    await store.write('tables/8/a', Buffer.from('x'));
    expect(synced.sort()).toEqual([join(root, 'tables'), join(root, 'tables', '8')].sort());
  });

  it('local store - an appendable object in a new directory syncs its parents before its first checkpoint', async () => {
    const store = new LocalObjectStore(root);
    await store.write('x', Buffer.from('x')); // the root exists
    synced.length = 0;
    const file = await store.openAppendable('tables/9/out.rf.partial');
    await file.append([Buffer.from('data')]);
    await file.flush();
    expect(synced.sort()).toEqual([root, join(root, 'tables'), join(root, 'tables', '9')].sort());
    await file.close();
  });
});
