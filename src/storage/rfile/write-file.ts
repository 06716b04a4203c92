/**
 * Writing a whole RFile in one call: the encoder (writer.ts) streamed into the store's atomic write.
 */
import { batchesOf, type BatchSource, type EntrySource } from '../batches.js';
import type { ObjectStore } from '../object-store.js';
import { RFileEncoder, type FileSummary, type RFileWriteOptions } from './writer.js';

/**
 * Writes a file of `entries` (sorted by compareEntries; out-of-order input is rejected with BAD_REQUEST
 * and nothing is written under `name`).
 */
export async function writeRFile(
  store: ObjectStore,
  name: string,
  entries: EntrySource,
  options: RFileWriteOptions = {},
): Promise<FileSummary> {
  return writeRFileBatches(store, name, batchesOf(entries), options);
}

/** {@link writeRFile} for entries already in batches (the merge's output). */
export async function writeRFileBatches(
  store: ObjectStore,
  name: string,
  batches: BatchSource,
  options: RFileWriteOptions = {},
): Promise<FileSummary> {
  const encoder = new RFileEncoder(name, options);
  const { size } = await store.write(name, encoder.encode(batches, options.signal), {
    signal: options.signal,
  });
  return encoder.summary(size);
}
