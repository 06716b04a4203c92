/**
 * Merge benchmark: K files of N entries through the iterator stack, beside baselines measured in the
 * same run on the same bytes. See bench/README.md.
 *
 *   npx tsx bench/merge.ts [--files 10] [--entries 200000] [--value-bytes 100]
 *                          [--compression none|deflate] [--s3 | --no-s3] [--rounds 3] [--keep]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  BLOCK_ENTRY_OPS,
  compactFiles,
  compileSettings,
  iteratorStackBatches,
  LocalObjectStore,
  MemoryObjectStore,
  openObjectStore,
  RFileReader,
  type Compression,
  type ObjectStore,
} from '../src/storage/index.js';
import { fileName, writeDataSet, writeTextFiles, type DataSpec } from './merge-data.js';
import { fmt, table } from './lib.js';
import { best, bestWithCpu, fmtRatio, MB, peakRss, runCommand } from './merge-measure.js';
import { startS3 } from './merge-s3.js';

const TARGET_MB_S = 85;
const SETTINGS = { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: true };

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '10' },
    entries: { type: 'string', default: '200000' },
    'value-bytes': { type: 'string', default: '100' },
    compression: { type: 'string', default: 'none' },
    s3: { type: 'boolean', default: true },
    'no-s3': { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    keep: { type: 'boolean', default: false },
  },
});

function positiveInt(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive integer, got ${value}`);
  return n;
}

const spec: DataSpec = {
  files: positiveInt('files', flags.files),
  entries: positiveInt('entries', flags.entries),
  valueBytes: positiveInt('value-bytes', flags['value-bytes']),
  compression: flags.compression === 'deflate' ? 'deflate' : 'none',
};
if (flags.compression !== 'none' && flags.compression !== 'deflate')
  throw new Error('--compression none|deflate');
const rounds = positiveInt('rounds', flags.rounds);
const withS3 = flags.s3 && !flags['no-s3'];
const inputs = Array.from({ length: spec.files }, (_, f) => fileName(f));
const totalEntries = spec.files * spec.entries;

/** Entries per second and input MB per second of one pass over the data set (`bytes` long) in `ms`. */
function rate(ms: number, bytes: number): { eps: number; mbs: number } {
  return { eps: totalEntries / (ms / 1000), mbs: bytes / MB / (ms / 1000) };
}

const dir = mkdtempSync(join(tmpdir(), 'exc-merge-bench-'));
const log = (line: string): void => void process.stdout.write(`${line}\n`);
const progress = (line: string): void => void process.stderr.write(`  … ${line}\n`);

try {
  await main();
} finally {
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  else log(`data kept in ${dir}`);
}

async function main(): Promise<void> {
  const local = new LocalObjectStore(join(dir, 'store'));
  progress('writing the data set');
  const summaries = await writeDataSet(local, spec);
  const rfileBytes = summaries.reduce((n, s) => n + s.size, 0);
  mkdirSync(join(dir, 'text'));
  const text = await writeTextFiles(join(dir, 'text'), spec);
  const rfilePaths = inputs.map((name) => local.pathOf(name));

  log(
    `excompact merge benchmark: ${spec.files} files × ${fmt(spec.entries)} entries, ${spec.valueBytes}-byte values, compression ${spec.compression}`,
  );
  log(
    `data set: ${fmt(rfileBytes / MB, 1)} MB of RFiles (${fmt(totalEntries)} entries), ${fmt(text.bytes / MB, 1)} MB as text lines; ` +
      `best of ${rounds} runs; Node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? '?'})`,
  );
  log('');

  progress('cat');
  const cat = rate(await best(rounds, () => runCommand('cat', rfilePaths)), rfileBytes);
  progress('sort -m');
  const sort = rate(
    await best(rounds, () => runCommand('sort', ['-m', ...text.paths], { LC_ALL: 'C' })),
    text.bytes,
  );

  progress('merge in memory');
  const memory = new MemoryObjectStore();
  for (const name of inputs) memory.put(name, await local.readRange(name, 0, Number.MAX_SAFE_INTEGER));
  const merge = rate(await best(rounds, () => mergeOnly(memory)), rfileBytes);

  progress('copy through the local store (baseline of the end-to-end figures)');
  const localCopy = rate(await best(rounds, () => copyThrough(local, 'output/copy.rf')), rfileBytes);
  progress('compaction local → local');
  const e2eRun = await bestWithCpu(rounds, () => compactOnce(local, spec.compression));
  const e2e = rate(e2eRun.ms, rfileBytes);
  const e2eCpu = rate(e2eRun.cpuMs, rfileBytes);

  progress('what deflate costs');
  const deflateLine = await deflateCost(local, rfileBytes);

  let s3Rows: string[][] = [];
  if (withS3) s3Rows = await s3Figures(local, rfileBytes);

  progress('peak memory (each compaction in its own process)');
  const memoryLine = await memoryFigures(local);

  const rows = [
    ['(a) cat RFiles > /dev/null (I/O ceiling)', fmt(cat.eps), fmt(cat.mbs, 1), '', ''],
    ['(b) LC_ALL=C sort -m, same entries as text', fmt(sort.eps), fmt(sort.mbs, 1), '', ''],
    [
      '(c) merge in memory through the iterator stack',
      fmt(merge.eps),
      fmt(merge.mbs, 1),
      '(b) sort -m, entries/s',
      fmtRatio(merge.eps / sort.eps),
    ],
    ['    local copy of the same bytes through the store', fmt(localCopy.eps), fmt(localCopy.mbs, 1), '', ''],
    [
      '(d) compaction local → local (read, merge, write)',
      fmt(e2e.eps),
      fmt(e2e.mbs, 1),
      'local copy, MB/s',
      fmtRatio(e2e.mbs / localCopy.mbs),
    ],
    [
      '    (d) per CPU-second of this process',
      fmt(e2eCpu.eps),
      fmt(e2eCpu.mbs, 1),
      'target 85 MB/s per core',
      fmtRatio(e2eCpu.mbs / TARGET_MB_S),
    ],
    ...s3Rows,
  ];
  log(table(['figure', 'entries/s', 'MB/s', 'baseline', 'ratio'], rows));
  log('');
  log(deflateLine);
  log(memoryLine);
}

async function mergeOnly(store: ObjectStore): Promise<void> {
  const readers = await Promise.all(inputs.map((name) => RFileReader.open(store, name)));
  let n = 0;
  for await (const batch of iteratorStackBatches(
    readers.map((r) => r.scanBatches()),
    compileSettings(SETTINGS),
    { ops: BLOCK_ENTRY_OPS },
  )) {
    n += batch.length;
  }
  if (n !== totalEntries) throw new Error(`merged ${n} entries, expected ${totalEntries}`);
}

async function* concatenated(store: ObjectStore): AsyncGenerator<Buffer> {
  for (const name of inputs) yield* store.readStream(name);
}

/** Reads every input and writes their bytes as one object: the I/O a compaction cannot avoid. */
async function copyThrough(store: ObjectStore, output: string): Promise<void> {
  await store.write(output, concatenated(store));
  await store.delete(output);
}

async function compactOnce(store: ObjectStore, compression: Compression): Promise<number> {
  const result = await compactFiles({
    store,
    inputs,
    output: 'output/merged.rf',
    settings: SETTINGS,
    compression,
  });
  if (result.entriesWritten !== totalEntries) throw new Error(`wrote ${result.entriesWritten} entries`);
  await store.delete('output/merged.rf');
  return result.output?.size ?? 0;
}

/** What deflate costs: compaction throughput and output size with and without it, and a full scan of each. */
async function deflateCost(store: LocalObjectStore, rfileBytes: number): Promise<string> {
  const figures: Record<'none' | 'deflate', { mbs: number; size: number; scanEps: number }> = {
    none: { mbs: 0, size: 0, scanEps: 0 },
    deflate: { mbs: 0, size: 0, scanEps: 0 },
  };
  for (const c of ['none', 'deflate'] as const) {
    const output = `output/${c}.rf`;
    const t0 = performance.now();
    const result = await compactFiles({ store, inputs, output, settings: SETTINGS, compression: c });
    const ms = performance.now() - t0;
    const reader = await RFileReader.open(store, output);
    const scanMs = await best(rounds, async () => {
      for await (const batch of reader.scanBatches()) void batch;
    });
    figures[c] = {
      mbs: rate(ms, rfileBytes).mbs,
      size: result.output?.size ?? 0,
      scanEps: rate(scanMs, rfileBytes).eps,
    };
    await store.delete(output);
  }
  const { none, deflate } = figures;
  return (
    `deflate (zlib level 1, per block), one run each: compaction ${fmt(deflate.mbs, 1)} MB/s vs ${fmt(none.mbs, 1)} MB/s with none (${fmtRatio(deflate.mbs / none.mbs)}); ` +
    `output ${fmtRatio(deflate.size / none.size)} the size; full scan ${fmt(deflate.scanEps)} vs ${fmt(none.scanEps)} entries/s (${fmtRatio(deflate.scanEps / none.scanEps)})`
  );
}

async function s3Figures(local: LocalObjectStore, rfileBytes: number): Promise<string[][]> {
  progress('starting s3rver');
  const server = await startS3();
  const s3 = openObjectStore({
    store: `s3://${server.bucket}/bench`,
    s3Endpoint: server.endpoint,
    s3AccessKeyId: 'S3RVER',
    s3SecretAccessKey: 'S3RVER',
    s3ForcePathStyle: true,
  });
  try {
    progress('uploading the inputs to s3rver');
    for (const name of inputs) await s3.write(name, local.readStream(name));
    const s3Rounds = Math.min(rounds, 2);
    progress('copy through S3');
    const copyMs = await best(s3Rounds, () => copyThrough(s3, 'output/copy.rf'));
    progress('compaction S3 → S3');
    const run = await bestWithCpu(s3Rounds, () => compactOnce(s3, spec.compression));
    const copy = rate(copyMs, rfileBytes);
    const e2e = rate(run.ms, rfileBytes);
    const e2eCpu = rate(run.cpuMs, rfileBytes);
    return [
      ['    S3 copy of the same bytes (GET inputs, PUT one object)', fmt(copy.eps), fmt(copy.mbs, 1), '', ''],
      [
        '(e) compaction S3 → S3 through s3rver on loopback',
        fmt(e2e.eps),
        fmt(e2e.mbs, 1),
        'S3 copy, MB/s',
        fmtRatio(e2e.mbs / copy.mbs),
      ],
      [
        '    (e) per CPU-second of this process (s3rver excluded)',
        fmt(e2eCpu.eps),
        fmt(e2eCpu.mbs, 1),
        'target 85 MB/s per core',
        fmtRatio(e2eCpu.mbs / TARGET_MB_S),
      ],
    ];
  } finally {
    await s3.close();
    await server.stop();
  }
}

/**
 * Peak RSS of one compaction of ⅛ of the entries per file, of the full data set, and of twice as many
 * entries per file, each in its own process. Independent of file size means the same for all three
 * (the heap stays flat; what varies is Buffer garbage waiting for the next major GC).
 */
async function memoryFigures(local: LocalObjectStore): Promise<string> {
  const runs = [];
  for (const factor of [1 / 8, 1, 2]) {
    const entries = Math.max(1, Math.floor(spec.entries * factor));
    let root = local.root;
    if (factor !== 1) {
      const store = new LocalObjectStore(join(dir, `x${factor}`));
      await writeDataSet(store, { ...spec, entries });
      root = store.root;
    }
    runs.push({ entries, ...(await child(root)) });
    if (factor !== 1) rmSync(root, { recursive: true, force: true });
  }
  const mb = (b: number | null): string => (b === null ? '?' : `${fmt(b / MB, 1)} MB`);
  return (
    `peak memory of one compaction in its own process, by entries per file: ` +
    runs
      .map(
        (r) =>
          `${fmt(r.entries)}: RSS ${mb(r.peakRss)}, JS heap ${mb(r.peakHeap)}, Buffers ${mb(r.peakBuffers)}`,
      )
      .join('; ') +
    ` (RSS at start, before reading: ${mb(runs[0]!.startRss)}); this process: ${mb(peakRss())} (holds the in-memory copy of the inputs)`
  );
}

interface ChildResult {
  ms: number;
  startRss: number | null;
  peakRss: number | null;
  peakHeap: number;
  peakBuffers: number;
}

function child(root: string): Promise<ChildResult> {
  const script = new URL('./merge-child.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [...process.execArgv, script, root, 'output/child.rf', spec.compression, ...inputs],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
    proc.once('error', reject);
    proc.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`merge-child exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as ChildResult);
    });
  });
}
