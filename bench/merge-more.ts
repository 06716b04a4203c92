/**
 * The merge benchmark's figures that need more than this process: S3 → S3 through s3rver (in its own
 * process), and two compactions at once on two worker threads against one.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statfsSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CompactionThreads } from '../src/compactor/compaction-thread.js';
import { LocalObjectStore, openObjectStore, type Compression } from '../src/storage/index.js';
import { best, least, MB, NOT_RUN, timed, type Timed } from './merge-measure.js';
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
  /** One thread's throughput, jobs back to back, in MB of input per second (the median round's). */
  oneMbPerS: number;
  /** Two threads', each taking the next job as soon as it is free (the median round's). */
  twoMbPerS: number;
  /** The median over rounds of each round's two against one. */
  ratio: number;
  /** Each round's ratio, in the order run. */
  roundRatios: number[];
  /**
   * Cores one compaction keeps busy (CPU time of all this process's threads over wall time, over all
   * rounds): beside its own thread, the garbage collector's helpers and the file system's thread pool.
   * Two on a machine of `cpus` cores can reach at most cpus / oneCores times one (`ceiling`).
   */
  oneCores: number;
  twoCores: number;
  ceiling: number;
  /**
   * Two jobs started together against one, both ended before the next pair starts (the figure of
   * stop 35 and before): the one that ends first leaves its core idle while the other finishes, which a
   * compactor's next job would fill. Best of the rounds each, as then.
   */
  pairRatio: number;
  /**
   * Cores of the machine idle while a task waited for the disk (`iowait`), and taken by the hypervisor
   * (`steal`), over the two threads' timed stretches: what two compactions lose to the storage under
   * them and to the host (/proc/stat; null where it cannot be read).
   */
  twoIowaitCores: number | null;
  twoStealCores: number | null;
  /**
   * The same ratio for a plain CPU loop (integer arithmetic in registers, no memory, no allocation) on one
   * thread against two at once, in the same rounds: what two threads of this machine reach at all, at the
   * moment of the run (a virtual machine's cores may share a physical core, or the host).
   */
  machineRatio: number;
}

/** (f) with the data set on the disk and in memory. */
export interface ParallelReport {
  /**
   * The store in the system's temporary directory (`diskDir`), where the other figures have it: the
   * figure of the target.
   */
  disk: ParallelFigures;
  diskDir: string;
  /**
   * The store in a memory file system (/dev/shm): the same system calls and page cache with no disk
   * under them, so what the cores alone allow (bench/README.md, "Two jobs on the disk and in memory").
   * Null where there is no such file system with room (`memoryAbsent` says why).
   */
  memory: ParallelFigures | null;
  memoryAbsent: string | null;
}

/** f_type of a tmpfs (statfs(2)). */
const TMPFS_MAGIC = 0x01021994;
/** Room for the inputs and the outputs (one per thread, and one more ending untimed), and to spare. */
const MEMORY_ROOM = 5;

/**
 * (f) twice: where the other figures have the data set, then with it copied into memory. Each run has
 * its own warm threads and rounds; the machine's moments differ between the two, by a minute or two.
 */
export async function parallelOnDiskAndInMemory(
  store: LocalObjectStore,
  inputs: string[],
  codec: Compression,
  logicalBytes: number,
  progress: (line: string) => void,
  rounds: number,
): Promise<ParallelReport> {
  progress(`two compaction threads against one, the data set on the disk (${tmpdir()})`);
  const disk = await parallelFigures(store, inputs, codec, logicalBytes, progress, rounds);
  const bytes = inputs.reduce((n, name) => n + statSync(store.pathOf(name)).size, 0);
  const where = memoryDirectory(MEMORY_ROOM * bytes);
  if ('absent' in where) {
    progress(`two compaction threads against one: not in memory, ${where.absent}`);
    return { disk, diskDir: tmpdir(), memory: null, memoryAbsent: where.absent };
  }
  try {
    progress(`two compaction threads against one, the data set in memory (${where.dir})`);
    const inMemory = new LocalObjectStore(where.dir);
    for (const name of inputs) {
      mkdirSync(dirname(inMemory.pathOf(name)), { recursive: true });
      copyFileSync(store.pathOf(name), inMemory.pathOf(name));
    }
    const memory = await parallelFigures(inMemory, inputs, codec, logicalBytes, progress, rounds);
    return { disk, diskDir: tmpdir(), memory, memoryAbsent: null };
  } finally {
    rmSync(where.dir, { recursive: true, force: true });
  }
}

/** A new directory in /dev/shm where it is a tmpfs with `bytes` free; else why not. */
function memoryDirectory(bytes: number): { dir: string } | { absent: string } {
  const shm = '/dev/shm';
  let fs;
  try {
    fs = statfsSync(shm);
  } catch {
    return { absent: `there is no ${shm}` };
  }
  if (fs.type !== TMPFS_MAGIC) return { absent: `${shm} is not a tmpfs` };
  const free = fs.bavail * fs.bsize;
  if (free < bytes)
    return { absent: `${shm} has ${(free / MB).toFixed(0)} MB free, ${(bytes / MB).toFixed(0)} MB needed` };
  return { dir: mkdtempSync(join(shm, 'exc-merge-bench-')) };
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

/** Jobs per round on one thread; two threads complete twice as many in about the same time. */
const JOBS_ONE = 1;

/**
 * Throughput of one compaction thread against two, each on a thread of a warm pool — what `compactor
 * --concurrency 2` does (compaction-thread.ts: its threads start with the process, and a slot takes the
 * next job as soon as its job ends). In each round, one thread runs JOBS_ONE jobs back to back, then two
 * threads run jobs until 2 × JOBS_ONE have ended; the clock stops at the last of those, while the other
 * thread is still busy with a job of which nothing is counted (so the figure errs low), and that job ends
 * untimed. The figure is the median of the rounds' ratios: one and two of a round meet the same moments
 * of a shared machine, whose speed moves by a third within seconds.
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
  let nextOutput = 0;
  const outputs: string[] = [];
  const run = async (): Promise<void> => {
    const output = `output/p${nextOutput++}.rf`;
    outputs.push(output);
    await threads.compact({ store, inputs, output, settings: SETTINGS, compression: codec });
  };
  // Outputs are deleted between measurements, untimed: a compactor's slot commits its output and takes
  // the next job; nothing in it deletes 137 MB (60–190 ms on an ext4 with `discard`, the slot waiting).
  const sweep = async (): Promise<void> => {
    for (const output of outputs.splice(0)) await store.delete(output);
  };
  let iowait = 0;
  let steal = 0;
  let machineMs = 0;
  /** Time until `jobs` have ended on `slots` threads that are never idle; CPU over that time. */
  const throughput = async (slots: number, jobs: number): Promise<Timed> => {
    let ended = 0;
    let stop: (t: Timed) => void;
    const done = new Promise<Timed>((resolve) => (stop = resolve));
    const machine0 = slots === 2 ? machineTimes() : null;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const slot = async (): Promise<void> => {
      // Never idle until the count is reached: a slot that ends a job before then starts another.
      while (ended < jobs) {
        await run();
        if (++ended === jobs) {
          const cpu = process.cpuUsage(cpu0);
          stop({ ms: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 });
        }
      }
    };
    // A slot whose last job ends after the count is reached is waited for (untimed) before returning.
    const all = Promise.all(Array.from({ length: slots }, slot));
    const t = await done;
    const machine1 = machine0 && machineTimes();
    if (machine0 && machine1) {
      iowait += machine1.iowaitMs - machine0.iowaitMs;
      steal += machine1.stealMs - machine0.stealMs;
      machineMs += t.ms;
    }
    await all;
    await sweep();
    return t;
  };
  try {
    // Warms the page cache and both threads' code.
    await Promise.all([run(), run()]);
    await sweep();
    const ones: Timed[] = [];
    const twos: Timed[] = [];
    const ratios: number[] = [];
    let pairOne = Infinity;
    let pairTwo = Infinity;
    // About as long as one compaction (set by its first round), so both see the same minutes.
    let iterations = 0;
    let spinOne = Infinity;
    let spinTwo = Infinity;
    for (let r = 0; r < rounds; r++) {
      // One, two, two, one: a machine that speeds up or slows down through the round weighs on both alike.
      progress(`one compaction thread, then two, two, one (round ${r + 1} of ${rounds})`);
      const o1 = await throughput(1, JOBS_ONE);
      const t1 = await throughput(2, 2 * JOBS_ONE);
      const t2 = await throughput(2, 2 * JOBS_ONE);
      const o2 = await throughput(1, JOBS_ONE);
      ones.push(o1, o2);
      twos.push(t1, t2);
      ratios.push((2 * (o1.ms + o2.ms)) / (t1.ms + t2.ms));
      progress('one compaction, then two started together and both ended');
      pairOne = Math.min(pairOne, await best(1, run));
      await sweep();
      pairTwo = Math.min(pairTwo, await best(1, () => Promise.all([run(), run()])));
      await sweep();
      progress('a plain CPU loop on one thread, and on two at once');
      if (iterations === 0) {
        const s0 = performance.now();
        await spin(1e8);
        iterations = Math.round((1e8 * Math.min(o1.ms / JOBS_ONE, 5_000)) / (performance.now() - s0));
      }
      spinOne = Math.min(spinOne, await best(1, () => spin(iterations)));
      spinTwo = Math.min(spinTwo, await best(1, () => Promise.all([spin(iterations), spin(iterations)])));
    }
    const ratio = median(ratios);
    const middle = ratios.indexOf(nearest(ratios, ratio));
    const sum = (ts: Timed[], k: keyof Timed) => ts.reduce((n, t) => n + t[k], 0);
    const oneCores = sum(ones, 'cpuMs') / sum(ones, 'ms');
    return {
      oneMbPerS:
        (2 * JOBS_ONE * logicalBytes) / MB / ((ones[2 * middle]!.ms + ones[2 * middle + 1]!.ms) / 1000),
      twoMbPerS:
        (4 * JOBS_ONE * logicalBytes) / MB / ((twos[2 * middle]!.ms + twos[2 * middle + 1]!.ms) / 1000),
      ratio,
      roundRatios: ratios,
      oneCores,
      twoCores: sum(twos, 'cpuMs') / sum(twos, 'ms'),
      ceiling: availableParallelism() / oneCores,
      twoIowaitCores: machineMs > 0 ? iowait / machineMs : null,
      twoStealCores: machineMs > 0 ? steal / machineMs : null,
      pairRatio: (2 * pairOne) / pairTwo,
      machineRatio: (2 * spinOne) / spinTwo,
    };
  } finally {
    await threads.close();
  }
}

/** The machine's time waiting for I/O and stolen by the hypervisor, over all cores (Linux); else null. */
function machineTimes(): { iowaitMs: number; stealMs: number } | null {
  try {
    // "cpu  user nice system idle iowait irq softirq steal …", in clock ticks of 10 ms (USER_HZ 100).
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
    if (fields[0] !== 'cpu' || fields.length < 9) return null;
    return { iowaitMs: Number(fields[5]) * 10, stealMs: Number(fields[8]) * 10 };
  } catch {
    return null;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function nearest(xs: number[], x: number): number {
  return xs.reduce((a, b) => (Math.abs(b - x) < Math.abs(a - x) ? b : a));
}
