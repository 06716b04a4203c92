/**
 * A worker thread that runs one compaction (compaction-thread.ts starts it): it opens the object store
 * from its settings, runs compactFiles, and posts progress, then the result or the error.
 *
 * Messages: in, `{ type: 'abort', reason }`; out, `{ type: 'progress', progress }` and
 * `{ type: 'checkpoint', checkpoint }` (checkpointed output, storage/parts.ts), then exactly one
 * `{ type: 'done', result }` or `{ type: 'failed', error: { code, message, details } }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ExcError, describeError } from '../errors.js';
import {
  compactFiles,
  openObjectStore,
  type CompactFilesArgs,
  type StoreSettings,
} from '../storage/index.js';

export interface WorkerInput {
  store: StoreSettings;
  args: Omit<CompactFilesArgs, 'store' | 'signal' | 'onProgress'>;
}

const port = parentPort;
if (!port) throw new Error('compaction-worker.ts runs only as a worker thread');
const input = workerData as WorkerInput;
const abort = new AbortController();
port.on('message', (m: { type: string; reason?: string }) => {
  if (m.type === 'abort') abort.abort(new ExcError('SHUTTING_DOWN', m.reason ?? 'compaction stopped'));
});

const store = openObjectStore(input.store);
try {
  const result = await compactFiles({
    ...input.args,
    store,
    signal: abort.signal,
    onProgress: (progress) => port.postMessage({ type: 'progress', progress }),
    ...(input.args.checkpoints
      ? {
          checkpoints: {
            ...input.args.checkpoints,
            onCheckpoint: (checkpoint) => port.postMessage({ type: 'checkpoint', checkpoint }),
          },
        }
      : {}),
  });
  port.postMessage({ type: 'done', result });
} catch (err) {
  const error =
    err instanceof ExcError
      ? { code: err.code, message: err.message, details: err.details }
      : { code: 'INTERNAL', message: describeError(err), details: {} };
  port.postMessage({ type: 'failed', error });
} finally {
  await store.close().catch(() => undefined);
  port.close();
}
