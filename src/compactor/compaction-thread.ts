/**
 * Compactions on worker threads, one thread per running job: `compactor <queue> --concurrency N` then
 * runs N merges on N cores instead of interleaving them on one event loop (a merge is CPU-bound: decode,
 * compare, compress). The main thread keeps the reservation protocol — progress reports, commit,
 * release — and stays responsive while merges run.
 *
 * A job's abort (release on SIGTERM, cancel, session loss) is sent to its thread, whose compaction stops
 * at the next batch and rejects like an in-process one, leaving no output; a thread that has not ended
 * {@link STOP_GRACE_MS} after the abort is terminated. Errors keep their code (CORRUPT_FILE,
 * STORE_UNAVAILABLE…), so failures are classified as for an in-process compaction.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ExcError, type ErrorCode, type ErrorDetails } from '../errors.js';
import type {
  Checkpoint,
  CompactFilesArgs,
  CompactionProgress,
  CompactionResult,
  StoreSettings,
} from '../storage/index.js';
import type { WorkerInput } from './compaction-worker.js';

/** After an abort, how long a thread has to stop by itself before it is terminated. */
const STOP_GRACE_MS = 2_000;

type Message =
  | { type: 'progress'; progress: CompactionProgress }
  | { type: 'checkpoint'; checkpoint: Checkpoint }
  | { type: 'done'; result: CompactionResult }
  | { type: 'failed'; error: { code: ErrorCode; message: string; details: ErrorDetails } };

/**
 * Starts the worker: the compiled .js next to this module, or, when running from the TypeScript sources
 * (tests, `tsx`), the .ts file after registering tsx's loader in the new thread (a worker does not
 * inherit the loader of the thread that starts it).
 */
function startWorker(workerData: WorkerInput): Worker {
  const js = new URL('./compaction-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(js))) return new Worker(js, { workerData });
  const ts = new URL('./compaction-worker.ts', import.meta.url).href;
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(ts)}); })`;
  return new Worker(boot, { eval: true, workerData });
}

/** A compaction function (the shape of compactFiles) that runs each compaction on its own thread. */
export function threadedCompactions(settings: StoreSettings) {
  // Only what names the store crosses to the threads (not the rest of the process's configuration).
  const store: StoreSettings = {
    store: settings.store,
    s3Endpoint: settings.s3Endpoint,
    s3Region: settings.s3Region,
    s3AccessKeyId: settings.s3AccessKeyId,
    s3SecretAccessKey: settings.s3SecretAccessKey,
    s3ForcePathStyle: settings.s3ForcePathStyle,
  };
  return (args: CompactFilesArgs): Promise<CompactionResult> => compactInThread(store, args);
}

export function compactInThread(store: StoreSettings, args: CompactFilesArgs): Promise<CompactionResult> {
  const { signal, onProgress } = args;
  signal?.throwIfAborted();
  const input: WorkerInput = {
    store,
    args: {
      inputs: args.inputs,
      output: args.output,
      settings: args.settings,
      progressEveryMs: args.progressEveryMs,
      blockSize: args.blockSize,
      compression: args.compression,
      ...(args.resume ? { resume: args.resume } : {}),
      ...(args.range ? { range: args.range } : {}),
      // The callback stays here: the thread posts each checkpoint back.
      ...(args.checkpoints
        ? { checkpoints: { everyBytes: args.checkpoints.everyBytes, everyMs: args.checkpoints.everyMs } }
        : {}),
    },
  };
  const worker = startWorker(input);
  return new Promise<CompactionResult>((resolve, reject) => {
    let settled = false;
    let killer: NodeJS.Timeout | undefined;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = (): void => {
      const reason: unknown = signal?.reason;
      worker.postMessage({
        type: 'abort',
        reason: reason instanceof Error ? reason.message : String(reason),
      });
      killer = setTimeout(() => void worker.terminate(), STOP_GRACE_MS);
      killer.unref();
    };
    // Once aborted, the job ends with the abort's reason, as compactFiles does — but only when its thread
    // has stopped (having removed its partial output) or was terminated.
    const failure = (err: Error): Error => {
      if (!signal?.aborted) return err;
      const reason: unknown = signal.reason;
      return reason instanceof Error ? reason : new ExcError('SHUTTING_DOWN', String(reason));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.on('message', (m: Message) => {
      if (m.type === 'progress') onProgress?.(m.progress);
      else if (m.type === 'checkpoint') args.checkpoints?.onCheckpoint?.(m.checkpoint);
      else if (m.type === 'done') settle(() => resolve(m.result));
      else
        settle(() =>
          reject(failure(new ExcError(m.error.code, m.error.message, { details: m.error.details }))),
        );
    });
    worker.once('error', (err) => settle(() => reject(failure(err))));
    worker.once('exit', (code) => {
      if (killer) clearTimeout(killer);
      settle(() =>
        reject(
          failure(new ExcError('INTERNAL', `the compaction thread exited (code ${code}) without a result`)),
        ),
      );
    });
  });
}
