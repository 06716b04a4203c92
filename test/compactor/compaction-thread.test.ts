/**
 * Compactions on worker threads (`compactor --concurrency N`): the same output as in this thread, its
 * progress, its errors with their codes, and an abort that stops the thread and leaves no output.
 */
import { readdirSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CompactionThreads, compactInThread } from '../../src/compactor/compaction-thread.js';
import {
  compactFiles,
  LocalObjectStore,
  makeEntry,
  writeRFile,
  type Checkpoint,
  type CompactionProgress,
  type Entry,
} from '../../src/storage/index.js';
import { nativeMerge } from '../../src/storage/native-merge.js';
import { useTempDirs } from '../support/temp-dirs.js';

const SETTINGS = { versions: 1, nowMs: 1_000_000, filters: [], dropDeletes: true };
const freshDir = useTempDirs('thread');

function* entries(file: number, n: number): Generator<Entry> {
  for (let i = 0; i < n; i++) {
    const row = `row${String(i * 3 + file).padStart(8, '0')}`;
    yield makeEntry(row, 'cf', 'cq', 1_000 + i, `value ${i % 97} of file ${file}`);
  }
}

async function inputs(n: number): Promise<{ store: LocalObjectStore; url: string; names: string[] }> {
  const dir = freshDir();
  const store = new LocalObjectStore(dir);
  const names: string[] = [];
  for (let f = 0; f < 3; f++) {
    names.push(`in/f${f}.rf`);
    await writeRFile(store, `in/f${f}.rf`, entries(f, n));
  }
  return { store, url: pathToFileURL(dir).href, names };
}

async function bytesOf(store: LocalObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('compaction thread', () => {
  it('checkpoints cross the thread boundary, and a threaded run resumes from one with the same bytes', async () => {
    const { store, url, names } = await inputs(20_000);
    const checkpoints: Checkpoint[] = [];
    await compactInThread(
      { store: url },
      {
        store,
        inputs: names,
        output: 'out/first.rf',
        settings: SETTINGS,
        checkpoints: { everyBytes: 32 * 1024, everyMs: 60_000, onCheckpoint: (cp) => checkpoints.push(cp) },
      },
    );
    expect(checkpoints.length).toBeGreaterThan(3);
    const middle = checkpoints[Math.floor(checkpoints.length / 2)]!;
    // The local store appends in place: the checkpoint names the attempt's file and its durable length.
    expect(middle.parts).toEqual([{ name: 'out/first.rf.partial', size: middle.bytes }]);
    const resumed = await compactInThread(
      { store: url },
      { store, inputs: names, output: 'out/resumed.rf', settings: SETTINGS, resume: middle },
    );
    expect(resumed.resumedBytes).toBe(middle.bytes);
    expect((await bytesOf(store, 'out/resumed.rf')).equals(await bytesOf(store, 'out/first.rf'))).toBe(true);
  });

  it('a compaction on a worker thread writes exactly what it writes in this thread, and reports progress', async () => {
    const { store, url, names } = await inputs(20_000);
    const progress: CompactionProgress[] = [];
    const threaded = await compactInThread(
      { store: url },
      {
        store,
        inputs: names,
        output: 'out/t.rf',
        settings: SETTINGS,
        progressEveryMs: 0,
        onProgress: (p) => progress.push(p),
      },
    );
    const local = await compactFiles({ store, inputs: names, output: 'out/l.rf', settings: SETTINGS });
    expect(threaded.entriesWritten).toBe(60_000);
    expect(threaded).toMatchObject({
      entriesRead: local.entriesRead,
      bytesWritten: local.bytesWritten,
      empty: false,
    });
    expect(
      (await store.readRange('out/t.rf', 0, 1e9)).equals(await store.readRange('out/l.rf', 0, 1e9)),
    ).toBe(true);
    expect(progress.length).toBeGreaterThan(1);
    expect(progress[progress.length - 1]!.entriesWritten).toBe(60_000);
  });

  it('a threaded compaction merges in native code unless asked not to, with the same bytes', async () => {
    const { store, url, names } = await inputs(5_000);
    const run = (output: string, nativeMerge?: boolean) =>
      compactInThread(
        { store: url },
        {
          store,
          inputs: names,
          output,
          settings: SETTINGS,
          ...(nativeMerge === undefined ? {} : { nativeMerge }),
        },
      );
    const native = await run('out/n.rf');
    const js = await run('out/j.rf', false);
    expect(native.nativeMerge).toBe(nativeMerge() !== null);
    expect(js.nativeMerge).toBe(false);
    expect(
      (await store.readRange('out/n.rf', 0, 1e9)).equals(await store.readRange('out/j.rf', 0, 1e9)),
    ).toBe(true);
  });

  it('errors keep their code: a corrupt input is CORRUPT_FILE naming it', async () => {
    const { store, url, names } = await inputs(2_000);
    const bytes = await store.readRange(names[1]!, 0, 1e9);
    bytes[40] = bytes[40]! ^ 0xff;
    await store.write(names[1]!, bytes);
    await expect(
      compactInThread({ store: url }, { store, inputs: names, output: 'out/c.rf', settings: SETTINGS }),
    ).rejects.toMatchObject({ code: 'CORRUPT_FILE', message: expect.stringContaining(names[1]!) as string });
    expect(await store.stat('out/c.rf')).toBeNull();
  });

  it('abort - rejects with the reason once the thread has stopped, and leaves nothing under the output name', async () => {
    const { store, url, names } = await inputs(100_000);
    const abort = new AbortController();
    const run = compactInThread(
      { store: url },
      {
        store,
        inputs: names,
        output: 'out/a.rf',
        settings: SETTINGS,
        compression: 'none',
        signal: abort.signal,
        progressEveryMs: 0,
        onProgress: (p) => {
          if (p.entriesWritten > 10_000) abort.abort(new Error('released for shutdown'));
        },
      },
    );
    await expect(run).rejects.toThrow('released for shutdown');
    expect(await store.stat('out/a.rf')).toBeNull();
    // No temporary left behind either: the thread removed it before it ended.
    expect(readdirSync(store.root, { recursive: true }).filter((f) => String(f).startsWith('out/'))).toEqual(
      [],
    );
  });
});

describe('compaction threads (the pool)', () => {
  it('pool - jobs one after another reuse one warm thread, and write what this thread writes', async () => {
    const { store, url, names } = await inputs(5_000);
    const threads = new CompactionThreads({ store: url }, 1);
    try {
      threads.warm();
      expect(threads.started).toBe(1);
      for (let i = 0; i < 4; i++) {
        const r = await threads.compact({ store, inputs: names, output: `out/p${i}.rf`, settings: SETTINGS });
        expect(r.entriesWritten).toBe(15_000);
      }
      expect(threads.started).toBe(1);
      await compactFiles({ store, inputs: names, output: 'out/local.rf', settings: SETTINGS });
      const local = await bytesOf(store, 'out/local.rf');
      for (let i = 0; i < 4; i++) expect((await bytesOf(store, `out/p${i}.rf`)).equals(local)).toBe(true);
    } finally {
      await threads.close();
    }
  });

  it('pool - two jobs at once run on two threads; an aborted job leaves its thread ready for the next', async () => {
    const { store, url, names } = await inputs(60_000);
    const threads = new CompactionThreads({ store: url }, 2);
    try {
      threads.warm();
      const abort = new AbortController();
      const aborted = threads.compact({
        store,
        inputs: names,
        output: 'out/a.rf',
        settings: SETTINGS,
        compression: 'none',
        signal: abort.signal,
        progressEveryMs: 0,
        onProgress: (p) => {
          if (p.entriesWritten > 10_000) abort.abort(new Error('cancelled by an operator'));
        },
      });
      const other = threads.compact({ store, inputs: names, output: 'out/b.rf', settings: SETTINGS });
      await expect(aborted).rejects.toThrow('cancelled by an operator');
      expect((await other).entriesWritten).toBe(180_000);
      expect(await store.stat('out/a.rf')).toBeNull();
      // Both threads are idle again and take the next jobs: none was started for them.
      const again = await Promise.all([
        threads.compact({ store, inputs: names, output: 'out/c.rf', settings: SETTINGS }),
        threads.compact({ store, inputs: names, output: 'out/d.rf', settings: SETTINGS }),
      ]);
      expect(again.map((r) => r.entriesWritten)).toEqual([180_000, 180_000]);
      expect(threads.started).toBe(2);
    } finally {
      await threads.close();
    }
    await expect(
      threads.compact({ store, inputs: names, output: 'out/e.rf', settings: SETTINGS }),
    ).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });

  it('pool - a thread that fails while idle is dropped, not the process; the job that needs one gets the error', async () => {
    const { store, names } = await inputs(100);
    // No store of that kind: every thread fails as it starts.
    const threads = new CompactionThreads({ store: 'ftp://nowhere/x' }, 1);
    try {
      threads.warm();
      await waitUntil(() => threads.threads === 0);
      await expect(
        threads.compact({ store, inputs: names, output: 'out/f.rf', settings: SETTINGS }),
      ).rejects.toThrow(/ftp:\/\/nowhere/);
      expect(threads.threads).toBe(0);
    } finally {
      await threads.close();
    }
  });
});

async function waitUntil(ok: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
