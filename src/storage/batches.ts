/**
 * Entries travel between readers, the merge and the writer in batches (one data block's worth): one
 * promise per batch instead of one per entry, which is most of the cost of an async iterator at a few
 * million entries per second. These adapt per-entry iterables at the public edges.
 */
import type { Entry } from './key.js';

export const BATCH_SIZE = 512;

export type EntrySource = AsyncIterable<Entry> | Iterable<Entry>;
export type BatchSource<T = Entry> = AsyncIterable<readonly T[]> | Iterable<readonly T[]>;

/** Groups a per-entry iterable into batches of up to `size`. */
export async function* batchesOf(entries: EntrySource, size = BATCH_SIZE): AsyncGenerator<Entry[]> {
  let batch: Entry[] = [];
  for await (const e of entries) {
    batch.push(e);
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** The entries of a batch iterable, one at a time. */
export async function* flatten<T>(batches: AsyncIterable<readonly T[]>): AsyncGenerator<T> {
  for await (const batch of batches) yield* batch;
}
