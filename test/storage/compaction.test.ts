import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compactFiles,
  COMPRESSIONS,
  DEFAULT_COMPRESSION,
  LocalObjectStore,
  makeEntry,
  MemoryObjectStore,
  openObjectStore,
  RFileReader,
  scanFiles,
  writeRFile,
  type CompactFilesArgs,
  type CompactionProgress,
  type CompactionResult,
  type Compression,
  type Entry,
  type IteratorSettings,
  type ObjectStore,
} from '../../src/storage/index.js';
import { ExcError } from '../../src/errors.js';
import { uniqueName, useS3 } from '../support/index.js';
import { useTempDirs } from '../support/temp-dirs.js';
import { collect } from '../support/entries.js';
import { modelScan, show } from './model.js';

const SCAN: IteratorSettings = { versions: 1, nowMs: 1_000, filters: [], dropDeletes: true };
const PARTIAL: IteratorSettings = { ...SCAN, dropDeletes: false };

/** `n` entries of file `f`: rows interleaved across files, some deletes, a few versions per cell. */
function* fileEntries(f: number, n: number, files: number): Generator<Entry> {
  for (let i = 0; i < n; i++) {
    const row = `row${String(i * files + f).padStart(8, '0')}`;
    yield makeEntry(row, 'cf', 'cq', 500 + (i % 3), `value-${f}-${i}`, i % 11 === 0);
  }
}

async function writeInputs(
  store: ObjectStore,
  files: number,
  n: number,
  prefix = 'in',
): Promise<{ names: string[]; entries: Entry[] }> {
  const names: string[] = [];
  const entries: Entry[] = [];
  for (let f = 0; f < files; f++) {
    const name = `${prefix}/f${f}.rf`;
    const list = [...fileEntries(f, n, files)];
    await writeRFile(store, name, list, { blockSize: 2048 });
    names.push(name);
    entries.push(...list);
  }
  return { names, entries };
}

const freshDir = useTempDirs('compact');
function localStore(): { store: LocalObjectStore; root: string } {
  const root = freshDir();
  return { store: new LocalObjectStore(root), root };
}

const ABORT_REASON = 'cancelled by test';

/**
 * Compacts with progress reported at every step and aborts (with {@link ABORT_REASON}) at the first report
 * for which `when` holds, so the abort lands in the middle of the merge or of the upload.
 */
function compactAbortingWhen(
  args: Pick<CompactFilesArgs, 'store' | 'inputs' | 'output' | 'settings' | 'compression'>,
  when: (p: CompactionProgress) => boolean,
): Promise<CompactionResult> {
  const controller = new AbortController();
  return compactFiles({
    ...args,
    signal: controller.signal,
    progressEveryMs: 0,
    onProgress: (p) => {
      if (when(p)) controller.abort(new Error(ABORT_REASON));
    },
  });
}

function filesUnder(root: string): string[] {
  return (
    readdirSync(root, { recursive: true, withFileTypes: true }) as {
      name: string;
      isFile(): boolean;
      parentPath: string;
    }[]
  )
    .filter((e) => e.isFile())
    .map((e) => `${e.parentPath.slice(root.length + 1)}/${e.name}`.replace(/^\//, ''))
    .sort();
}

describe('compactFiles', () => {
  it('merges the inputs through the stack into one file, and reports what it did', async () => {
    const { store } = localStore();
    const { names, entries } = await writeInputs(store, 4, 3_000);
    const progress: CompactionProgress[] = [];
    const result = await compactFiles({
      store,
      inputs: names,
      output: 'out/c.rf',
      settings: PARTIAL,
      onProgress: (p) => progress.push(p),
      progressEveryMs: 0,
    });
    const expected = modelScan(entries, PARTIAL);
    expect(result).toMatchObject({ empty: false, entriesRead: 12_000, entriesWritten: expected.length });
    const sizes = await Promise.all(names.map(async (n) => (await store.stat(n))!.size));
    // Every byte of every input, plus the footers that `open` read first.
    expect(result.bytesRead).toBeGreaterThanOrEqual(sizes.reduce((a, b) => a + b, 0));
    expect(result.bytesRead).toBeLessThanOrEqual(sizes.reduce((a, b) => a + b, 0) + names.length * 64 * 1024);
    expect(result.bytesWritten).toBe((await store.stat('out/c.rf'))!.size);
    expect(result.output).toMatchObject({ entries: expected.length, size: result.bytesWritten });
    const reader = await RFileReader.open(store, 'out/c.rf');
    expect(show(await collect(reader.scan()))).toEqual(show(expected));
    // Progress: more than the final report, never going backwards, ending at the result.
    expect(progress.length).toBeGreaterThan(2);
    for (let i = 1; i < progress.length; i++)
      expect(progress[i]!.entriesRead).toBeGreaterThanOrEqual(progress[i - 1]!.entriesRead);
    expect(progress[progress.length - 1]).toEqual({
      entriesRead: result.entriesRead,
      entriesWritten: result.entriesWritten,
      bytesRead: result.bytesRead,
      bytesWritten: result.bytesWritten,
      // Written in one stream: nothing composed from parts.
      bytesComposed: 0,
    });
  });

  it('writes no file when nothing survives the stack', async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'a.rf', [makeEntry('r', 'f', 'q', 1, 'v')]);
    await writeRFile(store, 'b.rf', [makeEntry('r', 'f', 'q', 2, '', true)]);
    const result = await compactFiles({ store, inputs: ['a.rf', 'b.rf'], output: 'c.rf', settings: SCAN });
    expect(result).toMatchObject({
      empty: true,
      output: null,
      entriesRead: 2,
      entriesWritten: 0,
      bytesWritten: 0,
    });
    expect(await store.stat('c.rf')).toBeNull();
    // The same inputs in a partial compaction keep the marker: a file is written.
    expect(
      (await compactFiles({ store, inputs: ['b.rf'], output: 'd.rf', settings: PARTIAL })).output?.entries,
    ).toBe(1);
  });

  it('a merge that drops everything still reports progress and hears an abort', async () => {
    const store = new MemoryObjectStore();
    const entries = Array.from({ length: 300_000 }, (_, i) =>
      makeEntry(`r${String(i).padStart(7, '0')}`, 'f', 'q', 1, 'old'),
    );
    await writeRFile(store, 'old.rf', entries);
    const aged = { ...SCAN, ttlMs: 10 };
    let calls = 0;
    const result = await compactFiles({
      store,
      inputs: ['old.rf'],
      output: 'x.rf',
      settings: aged,
      progressEveryMs: 0,
      onProgress: () => calls++,
    });
    expect(result.empty).toBe(true);
    expect(calls).toBeGreaterThan(3);
    const run = compactAbortingWhen(
      { store, inputs: ['old.rf'], output: 'x.rf', settings: aged },
      (p) => p.entriesRead > 0 && p.entriesRead < 300_000,
    );
    await expect(run).rejects.toThrow(ABORT_REASON);
  });

  it('abort - stops promptly and leaves no file under the output name, nor any temporary file', async () => {
    const { store, root } = localStore();
    const { names } = await writeInputs(store, 3, 40_000);
    const before = filesUnder(root);
    const started = Date.now();
    const run = compactAbortingWhen(
      { store, inputs: names, output: 'out/aborted.rf', settings: SCAN },
      (p) => p.entriesWritten > 20_000,
    );
    await expect(run).rejects.toThrow(ABORT_REASON);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await store.stat('out/aborted.rf')).toBeNull();
    expect(filesUnder(root)).toEqual(before);
  });

  it('checkpoints - a failed checkpoint sync fails the compaction with its error, and no checkpoint is reported', async () => {
    const { store } = localStore();
    const { names } = await writeInputs(store, 3, 20_000);
    let flushes = 0;
    // The disk fails the first sync of the checkpointed output (the appends before it succeed).
    const failing = Object.assign(Object.create(store) as LocalObjectStore, {
      openAppendable: async (name: string, from?: { name: string; size: number }) => {
        const file = await store.openAppendable(name, from);
        return {
          ...file,
          flush: async () => {
            flushes++;
            throw new ExcError('STORE_UNAVAILABLE', 'the disk went away');
          },
        };
      },
    });
    const checkpoints: number[] = [];
    await expect(
      compactFiles({
        store: failing,
        inputs: names,
        output: 'out/c.rf',
        settings: SCAN,
        compression: 'none',
        checkpoints: {
          everyBytes: 16 * 1024,
          everyMs: 60_000,
          onCheckpoint: (cp) => checkpoints.push(cp.bytes),
        },
      }),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: 'the disk went away' });
    expect(flushes).toBe(1);
    expect(checkpoints).toEqual([]);
    expect(await store.stat('out/c.rf')).toBeNull();
  });

  it('a corrupt input rejects with CORRUPT_FILE naming the file and block, and leaves no output', async () => {
    const store = new MemoryObjectStore();
    const { names } = await writeInputs(store, 3, 2_000);
    const bytes = store.bytes(names[1]!);
    bytes[10_000] = bytes[10_000]! ^ 0x40;
    store.put(names[1]!, bytes);
    const err = await compactFiles({ store, inputs: names, output: 'c.rf', settings: SCAN }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'CORRUPT_FILE' });
    expect((err as Error).message).toMatch(
      /in\/f1\.rf, data block \d+ at offset \d+: payload checksum mismatch/,
    );
    expect(await store.stat('c.rf')).toBeNull();
  });

  it('bad requests are refused before anything is read', async () => {
    const untouchable = new Proxy({} as ObjectStore, {
      get: (_, prop) =>
        prop === 'url'
          ? 'memory://untouchable'
          : () => Promise.reject(new Error(`store.${String(prop)} called`)),
    });
    const go = (inputs: string[], output: string, settings: unknown) =>
      compactFiles({ store: untouchable, inputs, output, settings: settings as IteratorSettings });
    const refused = async (promise: Promise<unknown>, code: string, text = ''): Promise<void> => {
      const err = await promise.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code });
      expect((err as Error).message).toContain(text);
    };
    await refused(go(['a.rf', 'a.rf'], 'c.rf', SCAN), 'BAD_REQUEST', 'twice');
    await refused(go(['a.rf'], 'a.rf', SCAN), 'BAD_REQUEST', 'also an input');
    await refused(go(['../a.rf'], 'c.rf', SCAN), 'INVALID_NAME');
    await refused(go(['a.rf'], 'c.rf', { ...SCAN, versions: 0 }), 'BAD_REQUEST', 'versions');
    await refused(
      go(['a.rf'], 'c.rf', { ...SCAN, filters: [{ name: 'eval', options: 'x' }] }),
      'BAD_REQUEST',
      'unknown filter "eval"',
    );
  });

  it('every codec - output smaller than none, reads back the same entries, and the codec is in its blocks', async () => {
    const store = new MemoryObjectStore();
    const { names } = await writeInputs(store, 2, 5_000);
    const compact = (output: string, compression: Compression) =>
      compactFiles({ store, inputs: names, output, settings: SCAN, compression });
    const plain = await compact('none.rf', 'none');
    const read = async (name: string) => show(await collect((await RFileReader.open(store, name)).scan()));
    const expected = await read('none.rf');
    for (const compression of ['deflate', 'lz4', 'zstd'] as const) {
      const packed = await compact(`${compression}.rf`, compression);
      expect(packed.bytesWritten).toBeLessThan(plain.bytesWritten * 0.7);
      // The first data block's header names the codec (none 0, deflate 1, lz4 2, zstd 3).
      expect(store.bytes(`${compression}.rf`)[1]).toBe(COMPRESSIONS.indexOf(compression));
      expect(await read(`${compression}.rf`)).toEqual(expected);
    }
  });

  it('the default codec is zstd', async () => {
    const store = new MemoryObjectStore();
    const { names } = await writeInputs(store, 1, 1_000);
    await compactFiles({ store, inputs: names, output: 'z.rf', settings: SCAN });
    expect(DEFAULT_COMPRESSION).toBe('zstd');
    expect(store.bytes('z.rf')[1]).toBe(3);
  });
});

describe('scanFiles', () => {
  it('reads a row range of several files through the stack', async () => {
    const { store } = localStore();
    const { names, entries } = await writeInputs(store, 3, 1_000);
    const range = {
      startRow: Buffer.from('row00000100'),
      startInclusive: false,
      endRow: Buffer.from('row00000200'),
      endInclusive: true,
    };
    const got = await collect(scanFiles({ store, files: names, range, settings: SCAN }));
    expect(got).toHaveLength(modelScan(entries, SCAN, range).length);
    expect(show(got)).toEqual(show(modelScan(entries, SCAN, range)));
    // The start is exclusive, the end inclusive.
    expect(
      got.every((e) => e.key.row.toString() > 'row00000100' && e.key.row.toString() <= 'row00000200'),
    ).toBe(true);
  });

  it('versions - the same entry in two files is one version, and a full compaction keeps one copy', async () => {
    const store = new MemoryObjectStore();
    const same = makeEntry('r', 'f', 'q', 10, 'v');
    await writeRFile(store, 'a.rf', [same]);
    await writeRFile(store, 'b.rf', [same]);
    await writeRFile(store, 'c.rf', [makeEntry('r', 'f', 'q', 5, 'old')]);
    const settings = { ...SCAN, versions: 2 };
    const values = (entries: Entry[]) => entries.map((e) => `${e.key.timestamp}:${e.value.toString()}`);
    const files = ['a.rf', 'b.rf', 'c.rf'];
    expect(values(await collect(scanFiles({ store, files, settings })))).toEqual(['10:v', '5:old']);
    // Two values at one timestamp are one version too: the smallest value's (the merge's order).
    await writeRFile(store, 'd.rf', [makeEntry('r', 'f', 'q', 10, 'u')]);
    const more = [...files, 'd.rf'];
    expect(values(await collect(scanFiles({ store, files: more, settings })))).toEqual(['10:u', '5:old']);
    const full = await compactFiles({ store, inputs: files, output: 'out.rf', settings });
    expect(full.entriesWritten).toBe(2);
    const out = await collect(
      scanFiles({ store, files: ['out.rf'], settings: { ...settings, versions: 5 } }),
    );
    expect(values(out)).toEqual(['10:v', '5:old']);
  });

  it('refuses bad settings at once', () => {
    expect(() =>
      scanFiles({ store: new MemoryObjectStore(), files: [], settings: { ...SCAN, versions: -1 } }),
    ).toThrow(/versions/);
  });
});

describe('compactFiles on S3', () => {
  const s3 = useS3();
  const open = (): ObjectStore =>
    openObjectStore(
      {
        store: `s3://${s3().bucket}/${uniqueName('c-')}`,
        s3Endpoint: s3().endpoint,
        s3AccessKeyId: s3().accessKeyId,
        s3SecretAccessKey: s3().secretAccessKey,
        s3ForcePathStyle: true,
      },
      undefined,
      { partSize: 5 * 1024 * 1024, retry: { attempts: 3, baseMs: 5 } },
    );

  it('end to end - inputs read from S3, output written to S3 in parts, equal to the model', async () => {
    const store = open();
    try {
      const { names, entries } = await writeInputs(store, 3, 45_000);
      // Uncompressed, so that the output is several parts long.
      const result = await compactFiles({
        store,
        inputs: names,
        output: 'out/c.rf',
        settings: PARTIAL,
        compression: 'none',
      });
      expect(result.bytesWritten).toBeGreaterThan(5 * 1024 * 1024);
      const got = await collect(scanFiles({ store, files: ['out/c.rf'], settings: PARTIAL }));
      expect(show(got)).toEqual(show(modelScan(entries, PARTIAL)));
    } finally {
      await store.close();
    }
  });

  it('abort - leaves no object under the output name', async () => {
    const store = open();
    try {
      const { names } = await writeInputs(store, 2, 100_000);
      await expect(
        compactAbortingWhen(
          { store, inputs: names, output: 'out/aborted.rf', settings: SCAN, compression: 'none' },
          // Past the first part: a multipart upload is in progress when the abort comes.
          (p) => p.bytesWritten > 5.5 * 1024 * 1024,
        ),
      ).rejects.toThrow(ABORT_REASON);
      expect(await store.stat('out/aborted.rf')).toBeNull();
    } finally {
      await store.close();
    }
  });
});
