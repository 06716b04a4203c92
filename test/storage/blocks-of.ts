/** The data blocks of a written file, as the stats model needs them (model.ts, modelStats). */
import { RFileReader, type ObjectStore } from '../../src/storage/index.js';

/** The entries of each data block of file `name`, in order. */
export async function blockCounts(store: ObjectStore, name: string): Promise<number[]> {
  const counts: number[] = [];
  for await (const b of (await RFileReader.open(store, name)).rawBlocks()) counts.push(b.count);
  return counts;
}
