/**
 * The split figures of bench/resume.ts (issue 17, part 4): one job compacted whole on one thread, against
 * the same job split by row range (storage/split-rows.ts) into `parts` sub-jobs run at once, each on a
 * thread of a warm pool as `compactor --concurrency` runs them — here, on this machine's cores. And on paper
 * for `machines` machines: the job split that many ways, each sub-job timed alone; with one sub-job per
 * machine the wall time is choosing the bounds plus the slowest sub-job (the store's bandwidth assumed not
 * to be the limit). Every split writes together the entries of the whole job (checked).
 */
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { CompactionThreads as CompactionThreadsType } from '../src/compactor/compaction-thread.js';
import {
  LocalObjectStore,
  splitRows,
  type CompactFilesArgs,
  type CompactionResult,
} from '../src/storage/index.js';
import { bestWithCpu } from './merge-measure.js';

export interface SplitFigures {
  /** Sub-jobs run at once on this machine, and what it took against the whole job on one thread. */
  parts: number;
  whole: { wallMs: number; cpuMs: number };
  split: { wallMs: number; cpuMs: number; boundsMs: number };
  splitWallRatio: number;
  splitCpuRatio: number;
  /** On paper: the job split `machines` ways, one sub-job per machine. */
  machines: number;
  slowestSubJobMs: number;
  machinesWallRatio: number;
}

/**
 * The compiled threads when built (`npm run build`), as a compactor runs them: a thread started from the
 * TypeScript sources first loads a compiler, a second or more that would be charged to every sub-job.
 */
async function threadPool(): Promise<typeof CompactionThreadsType> {
  const built = new URL('../dist/compactor/compaction-thread.js', import.meta.url);
  const module = (await import(existsSync(built) ? built.href : '../src/compactor/compaction-thread.js')) as {
    CompactionThreads: typeof CompactionThreadsType;
  };
  return module.CompactionThreads;
}

/** The warm-up slices are this fraction of the job each (one per thread). */
const WARM_UP_SLICES = 40;

const ratio = (a: number, b: number): number => Math.round((a / b) * 1000) / 1000;

export async function measureSplit(
  dir: string,
  args: Omit<CompactFilesArgs, 'output'>,
  options: { parts: number; machines: number; rounds: number; log: (msg: string) => void },
): Promise<SplitFigures> {
  const settings = { store: pathToFileURL(dir).href };
  // Threads started before the timing, as a compactor starts its pool with the process: a thread's start
  // is paid once per compactor, not per job.
  const threads = new (await threadPool())(settings, options.parts);
  threads.warm();
  // The threads open their own store from the settings; `args.store` stays on this thread.
  const run = (output: string, range?: { start?: string; end?: string }) =>
    threads.compact({ ...args, output, ...(range ? { range } : {}) });
  const store = LocalObjectStore.fromUrl(settings.store);
  const rangesOf = (bounds: string[]) =>
    Array.from({ length: bounds.length + 1 }, (_, i) => ({
      ...(i > 0 ? { start: bounds[i - 1] } : {}),
      ...(i < bounds.length ? { end: bounds[i] } : {}),
    }));
  const entries = (results: CompactionResult[]) => results.reduce((n, r) => n + r.entriesWritten, 0);
  try {
    // Every thread first merges a small slice of the job, untimed: a compactor's threads live for many
    // jobs, and V8 compiles the merge well only after about a second of running it on each thread.
    options.log('warming the threads…');
    const slices = rangesOf(await splitRows(store, args.inputs, WARM_UP_SLICES)).slice(0, options.parts);
    await Promise.all(slices.map((r, i) => run(`out/warm-${i}.rf`, r)));

    // The whole job and the split alternate, round after round, so that both meet the same moments of a
    // shared machine; each is the best of its rounds.
    let wholeEntries = 0;
    let boundsMs = Infinity;
    let whole = { ms: Infinity, cpuMs: Infinity };
    let split = { ms: Infinity, cpuMs: Infinity };
    for (let r = 0; r < options.rounds; r++) {
      options.log(`whole job on one thread (round ${r + 1} of ${options.rounds})…`);
      const w = await bestWithCpu(1, async () => {
        wholeEntries = (await run('out/whole.rf')).entriesWritten;
      });
      if (w.ms < whole.ms) whole = w;
      options.log(`split into ${options.parts} sub-jobs on ${options.parts} threads…`);
      const sp = await bestWithCpu(1, async () => {
        const t0 = performance.now();
        const bounds = await splitRows(store, args.inputs, options.parts);
        boundsMs = Math.min(boundsMs, performance.now() - t0);
        const results = await Promise.all(rangesOf(bounds).map((r, i) => run(`out/split-${i}.rf`, r)));
        if (entries(results) !== wholeEntries) throw new Error('the sub-jobs did not write the whole job');
      });
      if (sp.ms < split.ms) split = sp;
    }

    options.log(`split ${options.machines} ways, each sub-job alone…`);
    const bounds = await splitRows(store, args.inputs, options.machines);
    let slowest = 0;
    const results: CompactionResult[] = [];
    for (const [i, r] of rangesOf(bounds).entries()) {
      const t0 = performance.now();
      results.push(await run(`out/machine-${i}.rf`, r));
      slowest = Math.max(slowest, performance.now() - t0);
    }
    if (entries(results) !== wholeEntries) throw new Error('the sub-jobs did not write the whole job');
    return {
      parts: options.parts,
      whole: { wallMs: Math.round(whole.ms), cpuMs: Math.round(whole.cpuMs) },
      split: { wallMs: Math.round(split.ms), cpuMs: Math.round(split.cpuMs), boundsMs: Math.round(boundsMs) },
      // Target: <= 0.6 with 4 sub-jobs on 2 cores.
      splitWallRatio: ratio(split.ms, whole.ms),
      splitCpuRatio: ratio(split.cpuMs, whole.cpuMs),
      machines: options.machines,
      slowestSubJobMs: Math.round(slowest),
      machinesWallRatio: ratio(boundsMs + slowest, whole.ms),
    };
  } finally {
    await threads.close();
    await store.close();
  }
}
