/**
 * Merge benchmark: K files of N entries through the iterator stack, beside baselines measured in the
 * same run on the same bytes. See bench/README.md.
 *
 *   npx tsx bench/merge.ts [--files 10] [--entries 200000] [--value-bytes 100] [--run-length 1]
 *                          [--compression <codec>]
 *                          [--s3 | --no-s3] [--rounds 3] [--large] [--large-entries 2000000]
 *                          [--parallel] [--no-iterators] [--json] [--keep]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  COMPRESSIONS,
  crc32Implementation,
  DEFAULT_COMPRESSION,
  isCompression,
  LocalObjectStore,
  MemoryObjectStore,
  type Compression,
} from '../src/storage/index.js';
import { codecOf } from '../src/storage/rfile/compression.js';
import { nativeMerge } from '../src/storage/native-merge.js';
import { fileName, writeDataSet, writeTextFiles, type DataSpec } from './merge-data.js';
import {
  alternate,
  best,
  least,
  MB,
  NOT_RUN,
  peakRss,
  runCommand,
  timed,
  type Timed,
} from './merge-measure.js';
import { dataBlocks, measureCodec, type CodecCpu } from './codec-measure.js';
import { printReport, type Report } from './merge-report.js';
import {
  compactInChild,
  compactionOutputBlocks,
  compactOnce,
  copyThrough,
  mergeOnly,
  scanOnce,
} from './merge-runs.js';
import { tableIteratorFigures } from './merge-iterators.js';
import { parallelOnDiskAndInMemory, s3Figures } from './merge-more.js';

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '10' },
    entries: { type: 'string', default: '200000' },
    'value-bytes': { type: 'string', default: '100' },
    'run-length': { type: 'string', default: '1' },
    compression: { type: 'string', default: DEFAULT_COMPRESSION },
    s3: { type: 'boolean', default: true },
    'no-s3': { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    large: { type: 'boolean', default: false },
    'large-entries': { type: 'string', default: '2000000' },
    parallel: { type: 'boolean', default: true },
    'no-parallel': { type: 'boolean', default: false },
    'no-iterators': { type: 'boolean', default: false },
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
  runLength: positiveInt('run-length', flags['run-length']),
};
const rounds = positiveInt('rounds', flags.rounds);
const largeEntries = positiveInt('large-entries', flags['large-entries']);
const withS3 = flags.s3 && !flags['no-s3'];
const withParallel = flags.parallel && !flags['no-parallel'];
/** Untimed merges before the timed ones (see main). */
const WARM_UP = 2;
/** Rounds of (b) and (c) at least: each takes well under a second. */
const MERGE_ROUNDS = 10;
/**
 * Rounds of (d) at least for the run's codec and its baseline, the codec alone (the other codecs get
 * `--rounds`): its figure per CPU-second is the least CPU of its rounds, and one compaction's CPU time
 * moves by a fifth between rounds seconds apart on a shared machine. A compaction takes about a second.
 */
const CODEC_ROUNDS = 8;
/** Rounds of (f) at least, on disk and in memory each (one thread, two, a pair, the loop: seconds each). */
const PARALLEL_ROUNDS = 7;
const inputs = Array.from({ length: base.files }, (_, f) => fileName(f));
const totalEntries = base.files * base.entries;

const SETUP = new URL('../scripts/setup.mjs', import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'exc-merge-bench-'));
const progress = (line: string): void => void process.stderr.write(`  … ${line}\n`);

try {
  await main();
} finally {
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  else process.stderr.write(`data kept in ${dir}\n`);
}

async function main(): Promise<void> {
  // A fresh clone has the native merge only once `npm run setup` (or npm test, npm start) has built
  // it; built here when missing, so that the figures are those of the merge compactions run.
  progress('the native merge: building it if it is missing (scripts/setup.mjs --native)');
  // Its output (npm's, when it installs) goes to stderr: stdout is the figures (`--json`: one object).
  const setup = spawnSync(process.execPath, [fileURLToPath(SETUP), '--native', '--quiet'], {
    stdio: ['ignore', 2, 2],
  });
  if (setup.status !== 0) throw new Error('scripts/setup.mjs --native failed (above)');
  if (nativeMerge() === null)
    progress("the native merge is not built: the figures are the JavaScript merge's");
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
  // (b) and (c) alternate, round after round, so that both meet the same moments of a shared machine;
  // each is the best of its rounds. The merges first run WARM_UP times untimed: a compactor's threads
  // live for many jobs, and V8 compiles the merge's code well only after about a second of running it.
  // The first, cold merge is reported beside the warm figure.
  progress('sort -m and the merge in memory, alternately');
  const inMemory = async (c: Compression): Promise<MemoryObjectStore> => {
    const memory = new MemoryObjectStore();
    const store = stores.get(c)!;
    for (const name of inputs) memory.put(name, await store.readRange(name, 0, Number.MAX_SAFE_INTEGER));
    return memory;
  };
  const memoryNone = await inMemory('none');
  const memoryCodec = codec === 'none' ? memoryNone : await inMemory(codec);
  // The merge compactions run: native when the binding is built (and not turned off), and the
  // JavaScript merge, its fallback, beside it.
  const native = nativeMerge() !== null;
  const mergeNone = () => mergeOnly(memoryNone, inputs, totalEntries, native);
  const mergeCodec = () => mergeOnly(memoryCodec, inputs, totalEntries, native);
  const mergeJs = () => mergeOnly(memoryNone, inputs, totalEntries, false);
  const coldMs = await best(1, mergeNone);
  for (let i = 1; i < WARM_UP; i++) await mergeNone();
  for (let i = 0; i < WARM_UP && codec !== 'none'; i++) await mergeCodec();
  for (let i = 0; i < WARM_UP && native; i++) await mergeJs();
  const [sortMs, mergeMs, mergeCodecMs, mergeJsMs] = await alternate(Math.max(rounds, MERGE_ROUNDS), [
    () => runCommand('sort', ['-m', ...text.paths], { LC_ALL: 'C' }),
    mergeNone,
    codec === 'none' ? async () => undefined : mergeCodec,
    native ? mergeJs : async () => undefined,
  ]);
  const sort = rate(sortMs!, text.bytes);
  const merge = rate(mergeMs!);
  const mergeCold = rate(coldMs);
  const mergeInCodec = codec === 'none' ? merge : rate(mergeCodecMs!);
  const js = native ? rate(mergeJsMs!) : merge;

  progress('copy through the local store (baseline of the end-to-end figures)');
  const localCopy = rate(await best(rounds, () => copyThrough(none, inputs, 'output/copy.rf')));

  // (d) in rounds, each a compaction in every codec and the run's codec alone on the same blocks (its
  // baseline), so that all meet the same moments of the machine; each figure is the best of its rounds.
  // One compaction untimed first, as for the merge in memory (its code is the merge's and the writer's).
  await compactOnce(stores.get(codec)!, inputs, 'output/merged.rf', codec, totalEntries);
  // The codec alone compresses what a compaction compresses, its output's blocks, and decompresses what
  // it decompresses, its inputs' (bench/README.md, "The codec alone, on the blocks a compaction codes").
  const inputBlocks = dataBlocks(inputs.map((name) => memoryNone.bytes(name)));
  const outputBlocks = await compactionOutputBlocks(none, inputs);
  // Per codec: the fastest wall time and the least CPU time of its rounds (least, merge-measure.ts).
  const runs = new Map<Compression, Timed & { outputBytes: number }>();
  let codecCpu: CodecCpu | undefined;
  const codecRounds = Math.max(rounds, CODEC_ROUNDS);
  for (let r = 0; r < codecRounds; r++) {
    progress(
      r < rounds
        ? `compactions local → local in each codec, and the codec alone (round ${r + 1} of ${codecRounds})`
        : `the compaction local → local in ${codec}, and the codec alone (round ${r + 1} of ${codecRounds})`,
    );
    for (const c of r < rounds ? COMPRESSIONS : [codec]) {
      let outputBytes = 0;
      const run = await timed(async () => {
        outputBytes = await compactOnce(stores.get(c)!, inputs, 'output/merged.rf', c, totalEntries);
      });
      runs.set(c, { ...least(runs.get(c) ?? NOT_RUN, run), outputBytes });
    }
    const alone = await measureCodec(codecOf(codec), outputBlocks, 1, inputBlocks);
    codecCpu =
      codecCpu && codecCpu.compressCpuS + codecCpu.decompressCpuS <= alone.compressCpuS + alone.decompressCpuS
        ? codecCpu
        : alone;
  }
  const codecs = {} as Report['codecs'];
  for (const c of COMPRESSIONS) {
    const run = runs.get(c)!;
    const scanMs = await best(rounds, () => scanOnce(stores.get(c)!, inputs[0]!));
    codecs[c] = {
      inputBytes: stored.get(c)!,
      outputBytes: run.outputBytes,
      outputVsNone: 0,
      mbPerS: rate(run.ms).mbPerS,
      mbPerCpuS: rate(run.cpuMs).mbPerS,
      storedMbPerCpuS: rate(run.cpuMs, stored.get(c)).mbPerS,
      scanEntriesPerS: base.entries / (scanMs / 1000),
    };
  }
  for (const c of COMPRESSIONS) codecs[c].outputVsNone = codecs[c].outputBytes / codecs.none.outputBytes;

  const tableIterators = flags['no-iterators']
    ? null
    : await tableIteratorFigures(base.files, base.entries, codec, Math.max(rounds, MERGE_ROUNDS), progress);
  const s3 = withS3
    ? await s3Figures(stores.get(codec)!, inputs, codec, totalEntries, logical, rounds, progress)
    : null;
  const parallel = withParallel
    ? await parallelOnDiskAndInMemory(
        stores.get(codec)!,
        inputs,
        codec,
        logical,
        progress,
        Math.max(rounds, PARALLEL_ROUNDS),
      )
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
      crc32: crc32Implementation,
    },
    dataSet: { ...base, entries: totalEntries, rounds, codec, logicalBytes: logical, textBytes: text.bytes },
    cat,
    sortM: sort,
    mergeInMemory: {
      ...merge,
      vsSortM: merge.entriesPerS / sort.entriesPerS,
      cold: { ...mergeCold, vsSortM: mergeCold.entriesPerS / sort.entriesPerS },
    },
    mergeInMemoryCodec: { ...mergeInCodec, vsSortM: mergeInCodec.entriesPerS / sort.entriesPerS },
    mergeNative: native,
    mergeInMemoryJs: { ...js, vsSortM: js.entriesPerS / sort.entriesPerS },
    codecAlone: {
      codec,
      sizeVsRaw: codecCpu!.sizeVsRaw,
      compressCpuS: codecCpu!.compressCpuS,
      decompressCpuS: codecCpu!.decompressCpuS,
      // The most a compaction in this codec could do per CPU-second if nothing but the codec cost CPU.
      mbPerCpuSCeiling: logical / MB / (codecCpu!.compressCpuS + codecCpu!.decompressCpuS),
    },
    localCopy,
    codecs,
    tableIterators,
    defaultCodec: DEFAULT_COMPRESSION,
    s3,
    parallel,
    memory,
    large,
    thisProcessPeakRss: peakRss(),
  };
  printReport(report, flags.json);
}
