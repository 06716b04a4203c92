/**
 * Compactions on worker threads: `compactor <queue> --concurrency N` runs N merges on N cores instead of
 * interleaving them on one event loop (a merge is CPU-bound: decode, compare, compress). The main thread
 * keeps the reservation protocol — progress reports, commit, release — and stays responsive while merges
 * run.
 *
 * The threads are a pool ({@link CompactionThreads}) started with the compactor and reused job after
 * job: starting a thread costs about half a CPU-second (a new isolate loading the storage layer), which a
 * thread per job would pay again for every job, however small.
 *
 * A job's abort (release on SIGTERM, cancel, session loss) is sent to its thread, whose compaction stops
 * at the next batch and rejects like an in-process one, leaving no output, and the thread takes the next
 * job; a thread that has not ended the job {@link STOP_GRACE_MS} after the abort is terminated (and
 * replaced when next needed). Errors keep their code (CORRUPT_FILE, STORE_UNAVAILABLE…), so failures are
 * classified as for an in-process compaction.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ExcError, describeError, type ErrorCode, type ErrorDetails } from '../errors.js';
import type { Logger } from '../log.js';
import type {
  Checkpoint,
  CompactFilesArgs,
  CompactionProgress,
  CompactionResult,
  StoreSettings,
} from '../storage/index.js';
import type { JobArgs, ToWorker } from './compaction-worker.js';

/** After an abort, how long a thread has to stop by itself before it is terminated. */
const STOP_GRACE_MS = 2_000;

type FromWorker = { id: number } & (
  | { type: 'progress'; progress: CompactionProgress }
  | { type: 'checkpoint'; checkpoint: Checkpoint }
  | { type: 'done'; result: CompactionResult }
  | { type: 'failed'; error: { code: ErrorCode; message: string; details: ErrorDetails } }
);

/**
 * Starts a worker: the compiled .js next to this module, or, when running from the TypeScript sources
 * (tests, `tsx`), the .ts file after registering tsx's loader in the new thread (a worker does not
 * inherit the loader of the thread that starts it).
 */
function startWorker(store: StoreSettings): Worker {
  const js = new URL('./compaction-worker.js', import.meta.url);
  const worker = existsSync(fileURLToPath(js))
    ? new Worker(js, { workerData: store })
    : new Worker(
        `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(
          new URL('./compaction-worker.ts', import.meta.url).href,
        )}); })`,
        { eval: true, workerData: store },
      );
  // An idle thread never keeps the process alive: the compactor's own life decides when it exits.
  worker.unref();
  return worker;
}

/** Why an aborted job ended: the abort's reason, as compactFiles rejects with it. */
function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new ExcError('SHUTTING_DOWN', String(reason));
}

/** Only what names the store crosses to the threads (not the rest of the process's configuration). */
function storeOnly(settings: StoreSettings): StoreSettings {
  return {
    store: settings.store,
    s3Endpoint: settings.s3Endpoint,
    s3Region: settings.s3Region,
    s3AccessKeyId: settings.s3AccessKeyId,
    s3SecretAccessKey: settings.s3SecretAccessKey,
    s3ForcePathStyle: settings.s3ForcePathStyle,
  };
}

/** A pool of compaction threads, at most `keep` of them idle between jobs. */
export class CompactionThreads {
  private readonly store: StoreSettings;
  private readonly idle: Worker[] = [];
  private readonly busy = new Set<Worker>();
  private readonly dead = new WeakSet<Worker>();
  private nextId = 1;
  private closed = false;
  /** Threads started so far (each costs a thread's start; a warm pool starts no more). */
  started = 0;

  constructor(
    settings: StoreSettings,
    private readonly keep: number,
    private readonly log?: Logger,
  ) {
    this.store = storeOnly(settings);
  }

  /** Threads started ahead of the first jobs (so that no job waits for one to start). */
  get threads(): number {
    return this.idle.length + this.busy.size;
  }

  /** Starts threads until `keep` exist. */
  warm(): void {
    while (!this.closed && this.threads < this.keep) this.idle.push(this.start());
  }

  /** The shape of compactFiles: runs one compaction on a thread of the pool. */
  readonly compact = (args: CompactFilesArgs): Promise<CompactionResult> => {
    if (args.signal?.aborted) return Promise.reject(abortReason(args.signal));
    if (this.closed)
      return Promise.reject(new ExcError('SHUTTING_DOWN', 'the compaction threads are closed'));
    let worker = this.idle.pop();
    while (worker && this.dead.has(worker)) worker = this.idle.pop();
    worker ??= this.start();
    // A running job keeps the process alive, as an in-process compaction would.
    worker.ref();
    this.busy.add(worker);
    return this.run(worker, this.nextId++, args);
  };

  /** Ends every idle thread; a busy one ends when its job does. */
  async close(): Promise<void> {
    this.closed = true;
    const idle = this.idle.splice(0);
    await Promise.all(idle.map((w) => w.terminate()));
  }

  private start(): Worker {
    this.started++;
    const worker = startWorker(this.store);
    // A thread that fails or ends while idle (its store could not be opened, say) is dropped at once (its
    // 'exit' comes in a later callback than its 'error'), and the next job starts another; the error of a
    // thread running a job is that job's (run() listens for it). An 'error' with no listener at all would
    // end the process.
    const drop = (): void => {
      this.dead.add(worker);
      const i = this.idle.indexOf(worker);
      if (i >= 0) this.idle.splice(i, 1);
    };
    worker.on('error', (err) => {
      if (!this.busy.has(worker))
        this.log?.warn({ err: describeError(err) }, 'an idle compaction thread failed');
      drop();
    });
    worker.once('exit', drop);
    return worker;
  }

  private release(worker: Worker, reusable: boolean): void {
    this.busy.delete(worker);
    if (reusable && !this.closed && !this.dead.has(worker) && this.threads < this.keep) {
      worker.unref();
      this.idle.push(worker);
    } else void worker.terminate();
  }

  private run(worker: Worker, id: number, args: CompactFilesArgs): Promise<CompactionResult> {
    const { signal, onProgress } = args;
    const job: JobArgs = {
      inputs: args.inputs,
      output: args.output,
      settings: args.settings,
      progressEveryMs: args.progressEveryMs,
      blockSize: args.blockSize,
      compression: args.compression,
      ...(args.resume ? { resume: args.resume } : {}),
      ...(args.range ? { range: args.range } : {}),
      ...(args.fences ? { fences: args.fences } : {}),
      ...(args.nativeMerge === undefined ? {} : { nativeMerge: args.nativeMerge }),
      // The callback stays here: the thread posts each checkpoint back.
      ...(args.checkpoints
        ? { checkpoints: { everyBytes: args.checkpoints.everyBytes, everyMs: args.checkpoints.everyMs } }
        : {}),
    };
    return new Promise<CompactionResult>((resolve, reject) => {
      let settled = false;
      let killer: NodeJS.Timeout | undefined;
      const post = (m: ToWorker): void => worker.postMessage(m);
      const settle = (reusable: boolean, fn: () => void): void => {
        if (settled) return;
        settled = true;
        if (killer) clearTimeout(killer);
        signal?.removeEventListener('abort', onAbort);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        this.release(worker, reusable);
        fn();
      };
      const onAbort = (): void => {
        const reason: unknown = signal?.reason;
        post({ type: 'abort', id, reason: reason instanceof Error ? reason.message : String(reason) });
        // The job ends once the thread has exited (onExit), with the abort's reason.
        killer = setTimeout(() => void worker.terminate(), STOP_GRACE_MS);
        killer.unref();
      };
      // Once aborted, the job ends with the abort's reason, as compactFiles does — but only when its thread
      // has stopped it (having removed its partial output) or was terminated.
      const failure = (err: Error): Error => (signal?.aborted ? abortReason(signal) : err);
      const onMessage = (m: FromWorker): void => {
        if (m.id !== id) return;
        if (m.type === 'progress') onProgress?.(m.progress);
        else if (m.type === 'checkpoint') args.checkpoints?.onCheckpoint?.(m.checkpoint);
        else if (m.type === 'done') settle(true, () => resolve(m.result));
        else
          settle(true, () =>
            reject(failure(new ExcError(m.error.code, m.error.message, { details: m.error.details }))),
          );
      };
      const onError = (err: Error): void => settle(false, () => reject(failure(err)));
      const onExit = (code: number): void =>
        settle(false, () =>
          reject(
            failure(new ExcError('INTERNAL', `the compaction thread exited (code ${code}) without a result`)),
          ),
        );
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
      signal?.addEventListener('abort', onAbort, { once: true });
      post({ type: 'job', id, args: job });
    });
  }
}

/** One compaction on a thread of its own (tests and benchmarks; a compactor uses a pool). */
export async function compactInThread(
  store: StoreSettings,
  args: CompactFilesArgs,
): Promise<CompactionResult> {
  const threads = new CompactionThreads(store, 0);
  try {
    return await threads.compact(args);
  } finally {
    await threads.close();
  }
}
