/**
 * A resumed compaction on the local store starts its own file as a copy of the checkpointed bytes
 * (local-append.ts), before the merge goes on. The merge's figures stand still during the copy, and the
 * tablet server cancels a job whose figures stand still for the stall timeout — as a failure, which drops
 * the checkpoint: a copy of many gigabytes on a slow disk must keep reporting figures that move
 * (`bytesComposed`), or resuming a large job starts it over. The copy is made slow here by wrapping
 * `copyFile` of node:fs/promises: it writes the file in steps, as a kernel copy does.
 */
import type * as FsPromises from 'node:fs/promises';
import { appendFile, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  compactFiles,
  LocalObjectStore,
  makeEntry,
  writeRFile,
  type Checkpoint,
  type CompactionProgress,
} from '../../src/storage/index.js';
import { watchCopy } from '../../src/storage/local-append.js';
import { progressMoved } from '../../src/tserver/progress-rules.js';
import { tempDir } from '../support/index.js';

const slowCopy = { steps: 0, stepMs: 0 };

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof FsPromises>();
  const copyFile: typeof fs.copyFile = async (src, dest, mode) => {
    if (slowCopy.steps === 0) return fs.copyFile(src, dest, mode);
    const data = await fs.readFile(src);
    await fs.writeFile(dest, Buffer.alloc(0));
    const step = Math.ceil(data.length / slowCopy.steps);
    for (let at = 0; at < data.length; at += step) {
      await new Promise((r) => setTimeout(r, slowCopy.stepMs));
      await fs.appendFile(dest, data.subarray(at, at + step));
    }
  };
  return { ...fs, default: { ...fs, copyFile }, copyFile };
});

const SETTINGS = { versions: 1, nowMs: 1_000, filters: [], dropDeletes: true };

describe('resuming on the local store', () => {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => {
    dir = tempDir('resume-copy');
    slowCopy.steps = 0;
  });
  afterEach(() => dir.cleanup());

  it('watchCopy - tells the size of the copy as it grows, at most the size asked for, nothing once stopped', async () => {
    const path = join(dir.path, 'copy');
    await writeFile(path, Buffer.alloc(0));
    const seen: number[] = [];
    const watch = watchCopy(path, 250, (n) => seen.push(n), 20);
    for (let i = 0; i < 3; i++) {
      await appendFile(path, Buffer.alloc(100));
      await new Promise((r) => setTimeout(r, 150));
    }
    watch.stop();
    await appendFile(path, Buffer.alloc(100));
    await new Promise((r) => setTimeout(r, 150));
    expect(seen).toEqual([100, 200, 250]);
  });

  it('a resumed compaction reports progress that moves while it copies the checkpointed bytes', async () => {
    const store = new LocalObjectStore(join(dir.path, 'objects'));
    const entries = Array.from({ length: 6_000 }, (_, i) =>
      makeEntry(`row${String(i).padStart(8, '0')}`, 'cf', 'cq', 1, `value-${i}`.repeat(8)),
    );
    await writeRFile(store, 'in/a.rf', entries, { blockSize: 1024 });
    const common = {
      store,
      inputs: ['in/a.rf'],
      settings: SETTINGS,
      blockSize: 1024,
      compression: 'none' as const,
    };

    // The first attempt is killed right after its third checkpoint.
    const abort = new AbortController();
    let checkpoint: Checkpoint | undefined;
    let seen = 0;
    await expect(
      compactFiles({
        ...common,
        output: 'out/c1.rf',
        signal: abort.signal,
        checkpoints: {
          everyBytes: 64 * 1024,
          everyMs: 60_000,
          onCheckpoint: (cp) => {
            if (++seen === 3) {
              checkpoint = cp;
              abort.abort(new Error('killed'));
            }
          },
        },
      }),
    ).rejects.toThrow('killed');
    expect(checkpoint!.bytes).toBeGreaterThan(100_000);

    // The next resumes; its copy of the checkpointed bytes takes 6 × 500 ms.
    slowCopy.steps = 6;
    slowCopy.stepMs = 500;
    const reports: { at: number; p: CompactionProgress }[] = [];
    const started = Date.now();
    const result = await compactFiles({
      ...common,
      output: 'out/c2.rf',
      resume: checkpoint!,
      checkpoints: { everyBytes: 64 * 1024, everyMs: 60_000 },
      progressEveryMs: 50,
      onProgress: (p) => reports.push({ at: Date.now(), p: { ...p } }),
    });
    const ended = Date.now();
    expect(result.resumedBytes).toBe(checkpoint!.bytes);
    expect(result.bytesComposed).toBe(checkpoint!.bytes);

    // What the stall detector sees: the longest time without a report that moved (from the start).
    let last: CompactionProgress | undefined;
    let lastMoved = started;
    let longest = 0;
    for (const r of reports) {
      if (!progressMoved(last, r.p)) continue;
      longest = Math.max(longest, r.at - lastMoved);
      lastMoved = r.at;
      last = r.p;
    }
    longest = Math.max(longest, ended - lastMoved);
    expect(ended - started).toBeGreaterThan(3_000);
    // Reports of the copy came about every second (a copy silent to its end would leave 3 s).
    expect(longest).toBeLessThan(2_500);
    expect(reports.some((r) => r.p.bytesComposed > 0 && r.p.bytesComposed < checkpoint!.bytes)).toBe(true);

    // And the resumed output is the uninterrupted one.
    await compactFiles({ ...common, output: 'out/whole.rf' });
    expect((await stat(store.root + '/out/c2.rf')).size).toBe(result.output!.size);
    expect(
      (await readFile(join(store.root, 'out/c2.rf'))).equals(
        await readFile(join(store.root, 'out/whole.rf')),
      ),
    ).toBe(true);
  });
});
