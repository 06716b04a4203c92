/**
 * The merge benchmark's figures that need more than this process: S3 → S3 through s3rver (in its own
 * process), and two compactions at once on two worker threads against one.
 */
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CompactionThreads } from '../src/compactor/compaction-thread.js';
import { openObjectStore, type Compression, type LocalObjectStore } from '../src/storage/index.js';
import { best, bestWithCpu, least, MB, NOT_RUN, timed } from './merge-measure.js';
import { compactOnce, copyThrough, SETTINGS } from './merge-runs.js';
import { startS3 } from './merge-s3.js';

export interface S3Figures {
  codec: Compression;
  copyMbPerS: number;
  mbPerS: number;
  mbPerCpuS: number;
  vsCopy: number;
}

/** Compaction S3 → S3 of the data set in `codec`, beside a copy of the same bytes through the same server. */
export async function s3Figures(
  local: LocalObjectStore,
  inputs: string[],
  codec: Compression,
  expected: number,
  logicalBytes: number,
  rounds: number,
  progress: (line: string) => void,
): Promise<S3Figures> {
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
    let stored = 0;
    for (const name of inputs) stored += (await s3.write(name, local.readStream(name))).size;
    progress('copy through S3');
    const copyMs = await best(Math.min(rounds, 2), () => copyThrough(s3, inputs, 'output/copy.rf'));
    // One compaction untimed first, as for the local ones: the S3 client's code runs cold the first time
    // (a compactor's client lives for many jobs). Then the fastest and the least CPU of the rounds.
    progress(`compaction S3 → S3 (${codec})`);
    await compactOnce(s3, inputs, 'output/merged.rf', codec, expected);
    let run = NOT_RUN;
    for (let r = 0; r < rounds; r++) {
      run = least(run, await timed(() => compactOnce(s3, inputs, 'output/merged.rf', codec, expected)));
    }
    const copyMbPerS = stored / MB / (copyMs / 1000);
    return {
      codec,
      copyMbPerS,
      mbPerS: logicalBytes / MB / (run.ms / 1000),
      mbPerCpuS: logicalBytes / MB / (run.cpuMs / 1000),
      // Both in stored bytes: what the server moved per second.
      vsCopy: stored / MB / (run.ms / 1000) / copyMbPerS,
    };
  } finally {
    await s3.close();
    await server.stop();
  }
}

export interface ParallelFigures {
  oneMbPerS: number;
  twoMbPerS: number;
  ratio: number;
  /**
   * Cores one compaction keeps busy (CPU time of all this process's threads over wall time, its fastest
   * run): beside its own thread, the garbage collector's helpers and the file system's thread pool. Two
   * on a machine of `cpus` cores can reach at most cpus / oneCores times one (`ceiling`).
   */
  oneCores: number;
  twoCores: number;
  ceiling: number;
  /**
   * The same ratio for a plain CPU loop (integer arithmetic in registers, no memory, no allocation) on one
   * thread against two at once, in the same rounds: what two threads of this machine reach at all, at the
   * moment of the run (a virtual machine's cores may share a physical core, or the host).
   */
  machineRatio: number;
}

/** A worker thread that spins an integer loop for about `iterations` steps, then ends. */
function spin(iterations: number): Promise<void> {
  const code = `let x = 1; for (let i = 0; i < ${iterations}; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
require('node:worker_threads').parentPort.postMessage(x);`;
  return new Promise((resolve, reject) => {
    const w = new Worker(code, { eval: true });
    w.once('message', () => void w.terminate().then(() => resolve()));
    w.once('error', reject);
  });
}

/**
 * Throughput of one compaction against two at once, each on a thread of a warm pool — what
 * `compactor --concurrency 2` does (compaction-thread.ts: its threads start with the process). Each the
 * best of `rounds`, one and two alternately, like the benchmark's other timed figures.
 */
export async function parallelFigures(
  store: LocalObjectStore,
  inputs: string[],
  codec: Compression,
  logicalBytes: number,
  progress: (line: string) => void,
  rounds = 1,
): Promise<ParallelFigures> {
  const threads = new CompactionThreads({ store: pathToFileURL(store.root).href }, 2);
  threads.warm();
  const run = (output: string) =>
    threads
      .compact({ store, inputs, output, settings: SETTINGS, compression: codec })
      .then(() => store.delete(output));
  try {
    // Warms the page cache and both threads' code.
    await Promise.all([run('output/p0.rf'), run('output/p1.rf')]);
    let one = { ms: Infinity, cpuMs: Infinity };
    let two = { ms: Infinity, cpuMs: Infinity };
    // About as long as one compaction (set by its first round), so both see the same minutes.
    let iterations = 0;
    let spinOne = Infinity;
    let spinTwo = Infinity;
    for (let r = 0; r < rounds; r++) {
      progress('one compaction on a worker thread');
      const o = await bestWithCpu(1, () => run('output/p0.rf'));
      if (o.ms < one.ms) one = o;
      progress('two compactions at once, each on its own worker thread');
      const t = await bestWithCpu(1, () => Promise.all([run('output/p1.rf'), run('output/p2.rf')]));
      if (t.ms < two.ms) two = t;
      progress('a plain CPU loop on one thread, and on two at once');
      if (iterations === 0) {
        const t0 = performance.now();
        await spin(1e8);
        iterations = Math.round((1e8 * Math.min(o.ms, 5_000)) / (performance.now() - t0));
      }
      spinOne = Math.min(spinOne, await best(1, () => spin(iterations)));
      spinTwo = Math.min(spinTwo, await best(1, () => Promise.all([spin(iterations), spin(iterations)])));
    }
    const oneMbPerS = logicalBytes / MB / (one.ms / 1000);
    const twoMbPerS = (2 * logicalBytes) / MB / (two.ms / 1000);
    const oneCores = one.cpuMs / one.ms;
    return {
      oneMbPerS,
      twoMbPerS,
      ratio: twoMbPerS / oneMbPerS,
      oneCores,
      twoCores: two.cpuMs / two.ms,
      ceiling: availableParallelism() / oneCores,
      machineRatio: (2 * spinOne) / spinTwo,
    };
  } finally {
    await threads.close();
  }
}
