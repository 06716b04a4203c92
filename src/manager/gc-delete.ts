/**
 * The garbage collector's deletes from the object store (gc.ts): claimed files, `concurrency` at a time,
 * each right after the fence check (gc.ts, "Fencing"). A file the store refuses to delete fails only
 * itself; the fence and an abort stop them all.
 */
import type { Logger } from '../log.js';
import { ExcError, describeError } from '../errors.js';

export interface DeleteDeps {
  /** Where the files are deleted (any ObjectStore fits). */
  objects: { delete(name: string): Promise<void> };
  /** Deletes in flight at once. */
  concurrency: number;
  /** Throws unless the collector may delete now: checked right before each delete. */
  checkFence: () => Promise<void>;
  /** The collector's counters, updated as each delete ends. */
  stats: { deleted: number; failedDeletes: number };
  log: Logger;
}

/**
 * Deletes claimed files, `concurrency` at a time, checking the fence right before each delete; resolves
 * with the files deleted. A file the store refuses to delete (permissions, an S3 AccessDenied, a store
 * error) fails only itself: it is logged and counted, and the others are still deleted — otherwise one
 * such file would fail every cycle from then on, and nothing else would ever be collected again. Only
 * the fence (NOT_MANAGER, or its check failing) and an abort stop the deletes.
 */
export async function deleteClaimed(
  files: string[],
  signal: AbortSignal,
  deps: DeleteDeps,
): Promise<string[]> {
  let next = 0;
  const deleted: string[] = [];
  let stop = false;
  const worker = async (): Promise<void> => {
    while (!stop && next < files.length) {
      const file = files[next++]!;
      try {
        await deps.checkFence();
      } catch (err) {
        stop = true;
        throw err;
      }
      try {
        // An abort stops the wait, not the request: the cycle must not outlive stop() by however long
        // the store takes to answer.
        await abortable(deps.objects.delete(file), signal);
      } catch (err) {
        if (signal.aborted) {
          stop = true;
          throw err;
        }
        deps.stats.failedDeletes++;
        deps.log.warn(
          { file, code: errorCode(err), err: describeError(err) },
          'could not delete a garbage file; keeping its claim, a later cycle tries again',
        );
        continue;
      }
      deleted.push(file);
      deps.stats.deleted++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(deps.concurrency, files.length) }, worker));
  return deleted;
}

/** `promise`, or a rejection with the abort reason as soon as `signal` aborts. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  promise.catch(() => undefined); // a result that arrives after the abort is ignored
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

/**
 * The most specific code of a failed delete, for the log: the store's own (EACCES locally, AccessDenied on
 * S3: the cause's) when there is one, else the ExcError code.
 */
function errorCode(err: unknown): string | undefined {
  if (err instanceof ExcError) {
    if (typeof err.details.code === 'string') return err.details.code;
    return (err.cause === undefined ? undefined : errorCode(err.cause)) ?? err.code;
  }
  const e = err as { code?: unknown; Code?: unknown } | null;
  for (const v of [e?.Code, e?.code]) if (typeof v === 'string') return v;
  return err instanceof Error && err.name !== 'Error' ? err.name : undefined;
}
