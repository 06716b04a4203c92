/**
 * Merge benchmark: K files of N entries through the iterator stack, beside baselines measured in the
 * same run on the same bytes. See bench/README.md.
 *
 *   npx tsx bench/merge.ts [--files 10] [--entries 200000] [--value-bytes 100] [--compression <codec>]
 *                          [--s3 | --no-s3] [--rounds 3] [--large] [--large-entries 2000000]
 *                          [--parallel] [--json] [--keep]
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  COMPRESSIONS,
  DEFAULT_COMPRESSION,
  isCompression,
  LocalObjectStore,
  MemoryObjectStore,
  type Compression,
} from '../src/storage/index.js';
import { fileName, writeDataSet, writeTextFiles, type DataSpec } from './merge-data.js';
import { best, bestWithCpu, MB, peakRss, runCommand } from './merge-measure.js';
import { printReport, type Report } from './merge-report.js';
import { compactInChild, compactOnce, copyThrough, mergeOnly, scanOnce } from './merge-runs.js';
import { parallelFigures, s3Figures } from './merge-more.js';

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '10' },
    entries: { type: 'string', default: '200000' },
    'value-bytes': { type: 'string', default: '100' },
    compression: { type: 'string', default: DEFAULT_COMPRESSION },
    s3: { type: 'boolean', default: true },
    'no-s3': { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    large: { type: 'boolean', default: false },
    'large-entries': { type: 'string', default: '2000000' },
    parallel: { type: 'boolean', default: true },
    'no-parallel': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});

function positiveInt(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive integer, got ${value}`);
  return n;
}

if (!isCompression(flags.compression)) throw new Error(`--compression ${COMPRESSIONS.join('|')}`);
const codec: Compression = flags.compression;
const base = {
  files: positiveInt('files', flags.files),
  entries: positiveInt('entries', flags.entries),
  valueBytes: positiveInt('value-bytes', flags['value-bytes']),
};
const rounds = positiveInt('rounds', flags.rounds);
const largeEntries = positiveInt('large-entries', flags['large-entries']);
const withS3 = flags.s3 && !flags['no-s3'];
const withParallel = flags.parallel && !flags['no-parallel'];
const inputs = Array.from({ length: base.files }, (_, f) => fileName(f));
const totalEntries = base.files * base.entries;

const dir = mkdtempSync(join(tmpdir(), 'exc-merge-bench-'));
const progress = (line: string): void => void process.stderr.write(`  … ${line}\n`);

try {
  await main();
} finally {
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  else process.stderr.write(`data kept in ${dir}\n`);
}

async function main(): Promise<void> {
  const spec = (compression: Compression, entries = base.entries): DataSpec => ({
    ...base,
    entries,
    compression,
  });
  // One data set per codec, the same entries: inputs and outputs of a table that uses that codec.
  const stores = new Map<Compression, LocalObjectStore>();
  const stored = new Map<Compression, number>();
  for (const c of COMPRESSIONS) {
    progress(`writing the data set (${c})`);
    const store = new LocalObjectStore(join(dir, `store-${c}`));
    const summaries = await writeDataSet(store, spec(c));
    stores.set(c, store);
    stored.set(
      c,
      summaries.reduce((n, s) => n + s.size, 0),
    );
  }
  const none = stores.get('none')!;
  // MB are the data set's bytes uncompressed (its size as `none` RFiles): the work is the same whatever
  // the codec, and figures for different codecs compare.
  const logical = stored.get('none')!;
  mkdirSync(join(dir, 'text'));
  const text = await writeTextFiles(join(dir, 'text'), spec('none'));
  const rate = (ms: number, bytes = logical) => ({
    entriesPerS: totalEntries / (ms / 1000),
    mbPerS: bytes / MB / (ms / 1000),
  });

  progress('cat');
  const cat = rate(
    await best(rounds, () =>
      runCommand(
        'cat',
        inputs.map((n) => none.pathOf(n)),
      ),
    ),
  );
  progress('sort -m');
  const sort = rate(
    await best(rounds, () => runCommand('sort', ['-m', ...text.paths], { LC_ALL: 'C' })),
    text.bytes,
  );

  progress('merge in memory');
  const inMemory = async (c: Compression) => {
    const memory = new MemoryObjectStore();
    const store = stores.get(c)!;
    for (const name of inputs) memory.put(name, await store.readRange(name, 0, Number.MAX_SAFE_INTEGER));
    return rate(await best(rounds, () => mergeOnly(memory, inputs, totalEntries)));
  };
  const merge = await inMemory('none');
  const mergeCodec = codec === 'none' ? merge : await inMemory(codec);

  progress('copy through the local store (baseline of the end-to-end figures)');
  const localCopy = rate(await best(rounds, () => copyThrough(none, inputs, 'output/copy.rf')));

  const codecs = {} as Report['codecs'];
  for (const c of COMPRESSIONS) {
    progress(`compaction local → local (${c})`);
    const store = stores.get(c)!;
    let outputBytes = 0;
    const run = await bestWithCpu(rounds, async () => {
      outputBytes = await compactOnce(store, inputs, 'output/merged.rf', c, totalEntries);
    });
    const scanMs = await best(rounds, () => scanOnce(store, inputs[0]!));
    codecs[c] = {
      inputBytes: stored.get(c)!,
      outputBytes,
      outputVsNone: 0,
      mbPerS: rate(run.ms).mbPerS,
      mbPerCpuS: rate(run.cpuMs).mbPerS,
      storedMbPerCpuS: rate(run.cpuMs, stored.get(c)).mbPerS,
      scanEntriesPerS: base.entries / (scanMs / 1000),
    };
  }
  for (const c of COMPRESSIONS) codecs[c].outputVsNone = codecs[c].outputBytes / codecs.none.outputBytes;

  const s3 = withS3
    ? await s3Figures(stores.get(codec)!, inputs, codec, totalEntries, logical, rounds, progress)
    : null;
  const parallel = withParallel
    ? await parallelFigures(stores.get(codec)!, inputs, codec, logical, progress, rounds)
    : null;

  progress('peak memory (each compaction in its own process)');
  const memory = [];
  for (const factor of [1 / 8, 1, 2]) {
    const entries = Math.max(1, Math.floor(base.entries * factor));
    let root = stores.get(codec)!.root;
    if (factor !== 1) {
      const store = new LocalObjectStore(join(dir, `x${factor}`));
      await writeDataSet(store, spec(codec, entries));
      root = store.root;
    }
    memory.push({ entriesPerFile: entries, ...(await compactInChild(root, inputs, codec)) });
    if (factor !== 1) rmSync(root, { recursive: true, force: true });
  }

  let large: Report['large'] = null;
  if (flags.large) {
    progress(`larger than memory: ${base.files} files × ${largeEntries} entries (${codec})`);
    const store = new LocalObjectStore(join(dir, 'large'));
    const summaries = await writeDataSet(store, spec(codec, largeEntries));
    progress('larger than memory: compaction in its own process');
    const child = await compactInChild(store.root, inputs, codec);
    large = {
      files: base.files,
      entriesPerFile: largeEntries,
      inputBytes: summaries.reduce((n, s) => n + s.size, 0),
      ...child,
    };
    rmSync(store.root, { recursive: true, force: true });
  }

  const report: Report = {
    bench: 'merge',
    command: `npx tsx bench/merge.ts ${process.argv.slice(2).join(' ')}`.trim(),
    machine: {
      node: process.version,
      cpus: availableParallelism(),
      model: cpus()[0]?.model.trim() ?? '?',
    },
    dataSet: { ...base, entries: totalEntries, rounds, codec, logicalBytes: logical, textBytes: text.bytes },
    cat,
    sortM: sort,
    mergeInMemory: { ...merge, vsSortM: merge.entriesPerS / sort.entriesPerS },
    mergeInMemoryCodec: { ...mergeCodec, vsSortM: mergeCodec.entriesPerS / sort.entriesPerS },
    localCopy,
    codecs,
    defaultCodec: DEFAULT_COMPRESSION,
    s3,
    parallel,
    memory,
    large,
    thisProcessPeakRss: peakRss(),
  };
  printReport(report, flags.json);
}
