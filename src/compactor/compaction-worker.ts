/**
 * A worker thread that runs compactions, one at a time, for as long as its pool keeps it
 * (compaction-thread.ts): it opens the object store once from its settings, then runs each job it is
 * given with compactFiles and posts its progress, then its result or its error. A thread is started once
 * and reused: its start (a new isolate loading the storage layer and the AWS SDK, about half a CPU-second)
 * is paid once per thread, not once per job.
 *
 * Messages in: `{ type: 'job', id, args }`, `{ type: 'abort', id, reason }` (ignored unless job `id` is
 * running). The pool ends a thread by terminating it. Out, for job `id`: `{ type: 'progress', id, progress }` and
 * `{ type: 'checkpoint', id, checkpoint }` (checkpointed output, storage/parts.ts), then exactly one
 * `{ type: 'done', id, result }` or `{ type: 'failed', id, error: { code, message, details } }`.
 */
import { setMaxListeners } from 'node:events';
import { parentPort, workerData } from 'node:worker_threads';
import { ExcError, describeError } from '../errors.js';
import {
  compactFiles,
  openObjectStore,
  type CompactFilesArgs,
  type StoreSettings,
} from '../storage/index.js';

export type JobArgs = Omit<CompactFilesArgs, 'store' | 'signal' | 'onProgress'>;

export type ToWorker =
  { type: 'job'; id: number; args: JobArgs } | { type: 'abort'; id: number; reason: string };

const port = parentPort;
if (!port) throw new Error('compaction-worker.ts runs only as a worker thread');
const store = openObjectStore(workerData as StoreSettings);
let running: { id: number; abort: AbortController } | undefined;

port.on('message', (m: ToWorker) => {
  if (m.type === 'job') void run(m.id, m.args);
  else if (running?.id === m.id) running.abort.abort(new ExcError('SHUTTING_DOWN', m.reason));
});

async function run(id: number, args: JobArgs): Promise<void> {
  const abort = new AbortController();
  setMaxListeners(0, abort.signal); // every input's reads listen to it: more than ten at once is normal
  running = { id, abort };
  try {
    const result = await compactFiles({
      ...args,
      store,
      signal: abort.signal,
      onProgress: (progress) => port!.postMessage({ type: 'progress', id, progress }),
      ...(args.checkpoints
        ? {
            checkpoints: {
              ...args.checkpoints,
              onCheckpoint: (checkpoint) => port!.postMessage({ type: 'checkpoint', id, checkpoint }),
            },
          }
        : {}),
    });
    running = undefined;
    port!.postMessage({ type: 'done', id, result });
  } catch (err) {
    running = undefined;
    const error =
      err instanceof ExcError
        ? { code: err.code, message: err.message, details: err.details }
        : { code: 'INTERNAL', message: describeError(err), details: {} };
    port!.postMessage({ type: 'failed', id, error });
  }
}
