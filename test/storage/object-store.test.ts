import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalObjectStore, MemoryObjectStore, openObjectStore } from '../../src/storage/index.js';
import { tempDir } from '../support/index.js';
import { collect, names, objectStoreContract, temporaries } from './object-store.contract.js';

const dirs: { cleanup: () => void }[] = [];
afterAll(() => {
  for (const d of dirs) d.cleanup();
});

function freshDir(): string {
  const d = tempDir('store');
  dirs.push(d);
  return d.path;
}

objectStoreContract('local directory', async () => new LocalObjectStore(freshDir()));
objectStoreContract('memory', async () => new MemoryObjectStore());

/** Every file under a directory, hidden ones included, relative to it. */
function allFiles(root: string, dir = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...allFiles(root, rel));
    else out.push(rel);
  }
  return out.sort();
}

describe('local store', () => {
  it('url - file:///abs and file://./relative both open the directory; url is absolute', async () => {
    const root = freshDir();
    const a = openObjectStore({ store: pathToFileURL(root).href });
    expect(a).toBeInstanceOf(LocalObjectStore);
    expect((a as LocalObjectStore).root).toBe(root);
    expect(a.url).toBe(pathToFileURL(root).href);
    await a.write('x', Buffer.from('1'));
    const rel = openObjectStore({ store: `file://${relative(process.cwd(), root)}` });
    expect(rel.url).toBe(a.url);
    expect(await rel.stat('x')).not.toBeNull();
    expect(() => openObjectStore({ store: 'ftp://x' })).toThrow(/file:\/\/\/path or s3/);
  });

  it('failed write - no temporary file is left in the directory, not even a hidden one', async () => {
    const root = freshDir();
    const store = new LocalObjectStore(root);
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.alloc(3 << 20);
      throw new Error('midway');
    }
    await expect(store.write('t/1/f.rf', body())).rejects.toThrow('midway');
    expect(allFiles(root)).toEqual([]);
  });

  it('names - a file outside the root stays unreachable', async () => {
    const root = freshDir();
    writeFileSync(join(root, 'secret'), 'outside');
    mkdirSync(join(root, 'store'));
    const store = new LocalObjectStore(join(root, 'store'));
    await expect(store.readRange('../secret', 0, 10)).rejects.toMatchObject({ code: 'INVALID_NAME' });
    await expect(store.delete('../secret')).rejects.toMatchObject({ code: 'INVALID_NAME' });
    expect(existsSync(join(root, 'secret'))).toBe(true);
  });

  it('list - hidden temporary files of writes in progress are never listed', async () => {
    const root = freshDir();
    const store = new LocalObjectStore(root);
    mkdirSync(join(root, 'a'));
    writeFileSync(join(root, 'a', '.f.rf.0123.tmp'), 'half');
    writeFileSync(join(root, 'a', 'g.rf'), 'whole');
    expect(await names(store, '')).toEqual(['a/g.rf']);
    expect(await store.stat('a/g.rf')).not.toBeNull();
  });

  it('appendable - a flush answers what was appended before it, while appends go on', async () => {
    const store = new LocalObjectStore(freshDir());
    const file = await store.openAppendable('out/x.rf.partial');
    try {
      await file.append([Buffer.alloc(1000, 1)]);
      const flushed = file.flush();
      // Appended while the sync runs: not part of what that flush made durable.
      await file.append([Buffer.alloc(500, 2)]);
      expect(await flushed).toBe(1000);
      expect(await file.flush()).toBe(1500);
      expect(await file.finish('out/x.rf')).toBe(1500);
    } finally {
      await file.close();
    }
    const bytes = await store.readRange('out/x.rf', 0, 2000);
    expect(bytes.length).toBe(1500);
    expect(bytes[999]).toBe(1);
    expect(bytes[1000]).toBe(2);
  });

  it('crash - a writer killed mid-write leaves no object under the final name', async () => {
    const root = freshDir();
    const script = new URL('./support/slow-writer.ts', import.meta.url).pathname;
    const child = spawn(process.execPath, ['--import', 'tsx', script, root, 'tables/1/F1.rf'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // The writer says when it has written a few chunks, then keeps writing slowly.
    await new Promise<void>((resolve, reject) => {
      child.stdout.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`slow writer exited early with ${code}`)));
    });
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const store = new LocalObjectStore(root);
    expect(await store.stat('tables/1/F1.rf')).toBeNull();
    expect(await names(store, '')).toEqual([]);
    // What is left is the hidden temporary file, which no reader can mistake for the object.
    const files = allFiles(root);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^tables\/1\/\.F1\.rf\.[0-9a-f]+\.tmp$/);
    await expect(collect(store.readStream('tables/1/F1.rf'))).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
    });
    // The leftover is listed as a temporary of its target, and swept only once old enough.
    expect((await temporaries(store, 'tables/')).map((t) => [t.target, t.id])).toEqual([
      ['tables/1/F1.rf', files[0]],
    ]);
    expect(await temporaries(store, 'tables/2')).toEqual([]);
    expect(await store.sweepTemporaries('tables/', 60_000)).toBe(0);
    expect(allFiles(root)).toHaveLength(1);
    expect(await store.sweepTemporaries('tables/', 0)).toBe(1);
    expect(allFiles(root)).toEqual([]);
  });
});
