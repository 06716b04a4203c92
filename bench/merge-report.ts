/**
 * The merge benchmark's report: one JSON object (`--json`) or tables, with the targets of issue 14
 * checked against figures of the same run.
 */
import type { Compression } from '../src/storage/index.js';
import { fmt, table } from './lib.js';
import { fmtRatio, MB } from './merge-measure.js';
import type { IteratorFigures } from './merge-iterators.js';
import type { ParallelFigures, ParallelReport, S3Figures } from './merge-more.js';
import type { ChildResult } from './merge-runs.js';

export const TARGETS = {
  /** The in-memory merge against `sort -m`, entries per second. */
  mergeVsSortM: 0.8,
  /** Compaction local → local with the default codec, MB of data per CPU-second. */
  localMbPerCpuS: 150,
  s3MbPerCpuS: 120,
  /** Output size with the default codec against none. */
  outputVsNone: 0.6,
  /** Two compactions at once against one (the data set on the disk: ParallelReport). */
  twoJobs: 1.7,
  largePeakRssBytes: 300 * 1024 * 1024,
};

interface Rate {
  entriesPerS: number;
  mbPerS: number;
}

export interface CodecFigures {
  /** The data set's RFiles in this codec. */
  inputBytes: number;
  outputBytes: number;
  outputVsNone: number;
  /** MB of data (the data set's size uncompressed) per second and per CPU-second of this process. */
  mbPerS: number;
  mbPerCpuS: number;
  /** The same, counting the stored (compressed) input bytes. */
  storedMbPerCpuS: number;
  /** Full scan of one input file. */
  scanEntriesPerS: number;
}

export interface Report {
  bench: 'merge';
  command: string;
  /** `crc32`: the block checksums' implementation (rfile/crc.ts: native, or zlib's where no binary). */
  machine: { node: string; cpus: number; model: string; crc32: 'native' | 'zlib' };
  dataSet: {
    files: number;
    entries: number;
    valueBytes: number;
    runLength: number;
    rounds: number;
    codec: Compression;
    logicalBytes: number;
    textBytes: number;
  };
  cat: Rate;
  sortM: Rate;
  /** Warm (after untimed merges: what a compactor's long-lived threads run); `cold`: the first merge. */
  mergeInMemory: Rate & { vsSortM: number; cold: Rate & { vsSortM: number } };
  mergeInMemoryCodec: Rate & { vsSortM: number };
  /** Whether (c) is the native merge (native/merge.c), as compactions run it when it is built. */
  mergeNative: boolean;
  /** The JavaScript merge through the iterator stack (the fallback), in the same rounds. */
  mergeInMemoryJs: Rate & { vsSortM: number };
  /**
   * The run's codec alone, compressing the output's blocks and decompressing the inputs' (the blocks a
   * compaction compresses and decompresses) in memory used again: the CPU a compaction in it cannot
   * avoid, and so the most MB per CPU-second such a compaction could reach on this machine. `sizeVsRaw`
   * is the output's blocks'.
   */
  codecAlone: {
    codec: Compression;
    sizeVsRaw: number;
    compressCpuS: number;
    decompressCpuS: number;
    mbPerCpuSCeiling: number;
  };
  localCopy: Rate;
  codecs: Record<Compression, CodecFigures>;
  defaultCodec: Compression;
  /** (g) A compaction with a combiner and with filters beside the plain one (merge-iterators.ts). */
  tableIterators: IteratorFigures | null;
  s3: S3Figures | null;
  parallel: ParallelReport | null;
  memory: (ChildResult & { entriesPerFile: number })[];
  large: (ChildResult & { files: number; entriesPerFile: number; inputBytes: number }) | null;
  thisProcessPeakRss: number | null;
}

/** Each target with its figure from the run, and whether it is met (null: not measured in this run). */
export function targets(
  r: Report,
): Record<string, { figure: number | null; target: number; met: boolean | null }> {
  const d = r.codecs[r.defaultCodec];
  const at = (figure: number | null | undefined, target: number, atMost = false) => ({
    figure: figure ?? null,
    target,
    met: figure === null || figure === undefined ? null : atMost ? figure <= target : figure >= target,
  });
  return {
    mergeVsSortM: at(r.mergeInMemory.vsSortM, TARGETS.mergeVsSortM),
    localMbPerCpuS: at(r.dataSet.codec === r.defaultCodec ? d.mbPerCpuS : null, TARGETS.localMbPerCpuS),
    s3MbPerCpuS: at(r.s3?.codec === r.defaultCodec ? r.s3.mbPerCpuS : null, TARGETS.s3MbPerCpuS),
    outputVsNone: at(d.outputVsNone, TARGETS.outputVsNone, true),
    twoJobs: at(r.parallel?.disk.ratio, TARGETS.twoJobs),
    largePeakRss: at(r.large?.peakRss, TARGETS.largePeakRssBytes, true),
  };
}

export function printReport(r: Report, json: boolean): void {
  const out = (line = ''): void => void process.stdout.write(`${line}\n`);
  if (json) {
    out(JSON.stringify({ ...r, targets: targets(r) }));
    return;
  }
  const { dataSet: ds } = r;
  out(
    `excompact merge benchmark: ${ds.files} files × ${fmt(ds.entries / ds.files)} entries, ${ds.valueBytes}-byte values, keys dealt to the files in runs of ${ds.runLength}; codec of the run ${ds.codec} (default ${r.defaultCodec})`,
  );
  out(
    `data set: ${fmt(ds.logicalBytes / MB, 1)} MB as uncompressed RFiles (${fmt(ds.entries)} entries), ${fmt(ds.textBytes / MB, 1)} MB as text; ` +
      `best of ${ds.rounds}; Node ${r.machine.node}, ${r.machine.cpus} CPUs (${r.machine.model}); checksums ${r.machine.crc32}`,
  );
  out();
  const rows = [
    ['(a) cat RFiles > /dev/null (I/O ceiling)', fmt(r.cat.entriesPerS), fmt(r.cat.mbPerS, 1), '', ''],
    ['(b) LC_ALL=C sort -m, same entries as text', fmt(r.sortM.entriesPerS), fmt(r.sortM.mbPerS, 1), '', ''],
    [
      r.mergeNative
        ? '(c) merge in memory, native: decoding, merge, rules, output blocks (none)'
        : '(c) merge in memory through the iterator stack (none)',
      fmt(r.mergeInMemory.entriesPerS),
      fmt(r.mergeInMemory.mbPerS, 1),
      '(b), entries/s',
      fmtRatio(r.mergeInMemory.vsSortM),
    ],
    [
      '    the first merge of the process (cold)',
      fmt(r.mergeInMemory.cold.entriesPerS),
      fmt(r.mergeInMemory.cold.mbPerS, 1),
      '(b), entries/s',
      fmtRatio(r.mergeInMemory.cold.vsSortM),
    ],
    [
      `    the same, inputs in ${ds.codec}`,
      fmt(r.mergeInMemoryCodec.entriesPerS),
      fmt(r.mergeInMemoryCodec.mbPerS, 1),
      '(b), entries/s',
      fmtRatio(r.mergeInMemoryCodec.vsSortM),
    ],
    ...(r.mergeNative
      ? [
          [
            '    the JavaScript merge (iterator stack), the fallback',
            fmt(r.mergeInMemoryJs.entriesPerS),
            fmt(r.mergeInMemoryJs.mbPerS, 1),
            '(b), entries/s',
            fmtRatio(r.mergeInMemoryJs.vsSortM),
          ],
        ]
      : []),
    ['    local copy of the same bytes through the store', '', fmt(r.localCopy.mbPerS, 1), '', ''],
  ];
  out(table(['figure', 'entries/s', 'MB/s', 'baseline', 'ratio'], rows));
  out();
  out('(d) compaction local → local, inputs and output in each codec (MB: the data uncompressed)');
  const ca = r.codecAlone;
  out(
    `    baseline: the codec alone (${ca.codec}: the output's blocks compressed to ${fmtRatio(ca.sizeVsRaw)} of their size, the inputs' decompressed): compress ${fmt(ca.compressCpuS, 2)} CPU-s + decompress ${fmt(ca.decompressCpuS, 2)} CPU-s, ` +
      `so at most ${fmt(ca.mbPerCpuSCeiling, 1)} MB per CPU-second for a compaction in it on this machine`,
  );
  out();
  out(
    table(
      ['codec', 'MB/s', 'MB per CPU-s', 'stored MB per CPU-s', 'output', 'vs none', 'scan entries/s'],
      (Object.entries(r.codecs) as [Compression, CodecFigures][]).map(([c, f]) => [
        c === r.defaultCodec ? `${c} (default)` : c,
        fmt(f.mbPerS, 1),
        fmt(f.mbPerCpuS, 1),
        fmt(f.storedMbPerCpuS, 1),
        `${fmt(f.outputBytes / MB, 1)} MB`,
        fmtRatio(f.outputVsNone),
        fmt(f.scanEntriesPerS),
      ]),
    ),
  );
  out();
  if (r.tableIterators) out(iteratorLine(r.tableIterators));
  if (r.s3) {
    out(
      `(e) compaction S3 → S3 (${r.s3.codec}) through s3rver on loopback: ${fmt(r.s3.mbPerS, 1)} MB/s, ${fmt(r.s3.mbPerCpuS, 1)} MB per CPU-second; ` +
        `S3 copy of the stored bytes ${fmt(r.s3.copyMbPerS, 1)} MB/s (${fmtRatio(r.s3.vsCopy)} of it)`,
    );
  }
  if (r.parallel) {
    const p = r.parallel;
    out(parallelLine(`on the disk (${p.diskDir})`, p.disk, r.machine.cpus));
    if (p.memory) out(parallelLine('in memory (/dev/shm)', p.memory, r.machine.cpus));
    else out(`(f) two compaction threads, the data set in memory: not measured, ${p.memoryAbsent}`);
  }
  const mb = (b: number | null): string => (b === null ? '?' : `${fmt(b / MB, 1)} MB`);
  out(
    `peak memory of one compaction in its own process, by entries per file: ` +
      r.memory
        .map(
          (m) =>
            `${fmt(m.entriesPerFile)}: RSS ${mb(m.peakRss)}, JS heap ${mb(m.peakHeap)}, Buffers ${mb(m.peakBuffers)}`,
        )
        .join('; ') +
      ` (RSS at start: ${mb(r.memory[0]?.startRss ?? null)})`,
  );
  if (r.large) {
    const l = r.large;
    out(
      `larger than memory: ${l.files} files × ${fmt(l.entriesPerFile)} entries (${mb(l.inputBytes)} of ${ds.codec} RFiles) in ${fmt(l.ms / 1000, 1)} s: peak RSS ${mb(l.peakRss)}, JS heap ${mb(l.peakHeap)}`,
    );
  }
  out();
  out('targets (issue 14):');
  for (const [name, t] of Object.entries(targets(r))) {
    const show = (n: number): string => (name === 'largePeakRss' ? mb(n) : fmt(n, 2));
    const figure = t.figure === null ? 'not measured' : show(t.figure);
    out(`  ${name}: ${figure} (target ${show(t.target)}) ${t.met === null ? '' : t.met ? 'met' : 'NOT met'}`);
  }
}

function iteratorLine(t: IteratorFigures): string {
  return (
    `(g) table iterators, ${t.files} files × ${fmt(t.counters)} counters (${fmt(t.entriesIn)} entries in), input entries/s: ` +
    `plain ${fmt(t.plain.entriesPerS)}${t.plain.native ? ' (native)' : ''}, plain in JavaScript ${fmt(t.plainJs.entriesPerS)}; ` +
    `sum ${fmt(t.sum.entriesPerS)} (${fmtRatio(t.sum.vsPlainJs)} of plain in JavaScript, ${fmtRatio(t.sum.vsPlain)} of plain); ` +
    `filters ${fmt(t.filters.entriesPerS)} (${fmtRatio(t.filters.vsPlainJs)}, ${fmtRatio(t.filters.vsPlain)}; ${fmt(t.filters.entriesOut)} entries out)`
  );
}

function parallelLine(where: string, f: ParallelFigures, cpus: number): string {
  const lost =
    f.twoIowaitCores === null || f.twoStealCores === null
      ? ''
      : `; while two ran, ${fmt(f.twoIowaitCores, 2)} cores waited for the disk and the hypervisor took ${fmt(f.twoStealCores, 2)}`;
  return (
    `(f) two compaction threads, the data set ${where}, each taking the next job when free: ${fmt(f.twoMbPerS, 1)} MB/s against ${fmt(f.oneMbPerS, 1)} MB/s for one (${fmtRatio(f.ratio)}, ` +
    `the median of rounds ${f.roundRatios.map((x) => fmtRatio(x)).join(' ')}); ` +
    `one keeps ${fmt(f.oneCores, 2)} cores busy, two ${fmt(f.twoCores, 2)}: at most ${fmtRatio(f.ceiling)} on ${cpus} cores${lost}; ` +
    `two jobs started together and both ended: ${fmtRatio(f.pairRatio)} of one; ` +
    `a plain CPU loop on two threads reaches ${fmtRatio(f.machineRatio)} of one in the same rounds`
  );
}
