/**
 * A whole RFile checked before it is trusted (a bulk import's files, written outside the cluster): its
 * footer and index whole, every block's checksum and codec, every entry in order across blocks, and the
 * footer's count and first and last keys matching what the blocks hold. What a file's entries are is
 * returned with it: rows, delete markers and timestamps, which a tablet cannot learn from the index.
 */
import { compareEntries, type Entry } from '../key.js';
import type { ObjectStore } from '../object-store.js';
import { corruptFile } from './corrupt.js';
import { FileStatsCounter, type FileStats } from './file-stats.js';
import { RFileReader } from './reader.js';

export interface FileFacts {
  size: number;
  entries: number;
  deletes: number;
  /** Key and value bytes, entries per family: what the writer's summary would say (null: no entries). */
  stats: FileStats | null;
  /** First and last rows; null for a file without entries. */
  firstRow: Buffer | null;
  lastRow: Buffer | null;
  /** The oldest and newest timestamps of its entries (0 for a file without entries). */
  oldestTs: number;
  newestTs: number;
}

/** Reads `name` whole; CORRUPT_FILE naming what is wrong, OBJECT_NOT_FOUND when it is missing. */
export async function verifyRFile(
  store: ObjectStore,
  name: string,
  signal?: AbortSignal,
): Promise<FileFacts> {
  const reader = await RFileReader.open(store, name, { signal });
  const facts: FileFacts = {
    size: reader.summary.size,
    entries: 0,
    deletes: 0,
    stats: null,
    firstRow: null,
    lastRow: null,
    oldestTs: 0,
    newestTs: 0,
  };
  let last: Entry | undefined;
  // The whole file as one block of the writer's rule (file-stats.ts): its first 16 families by name.
  const counter = new FileStatsCounter();
  for await (const e of reader.scan({}, { signal })) {
    if (last && compareEntries(last, e) >= 0) {
      throw corruptFile(
        name,
        null,
        `entry ${facts.entries + 1} is out of order (${compareEntries(last, e) === 0 ? 'a duplicate of the one before' : 'it sorts before the one before'}): entries must be sorted by key, and by value when keys are equal`,
      );
    }
    if (!last) facts.firstRow = Buffer.from(e.key.row);
    facts.entries++;
    counter.entry(e);
    last = e;
  }
  if (last) facts.lastRow = Buffer.from(last.key.row);
  counter.place(counter.seal());
  const stats = counter.placedStats() ?? null;
  facts.stats = stats;
  facts.deletes = stats?.deletes ?? 0;
  facts.oldestTs = stats?.oldestTs ?? 0;
  facts.newestTs = stats?.newestTs ?? 0;
  const { summary } = reader;
  if (facts.entries !== summary.entries)
    throw corruptFile(name, 'footer', `says ${summary.entries} entries, the blocks hold ${facts.entries}`);
  const sameRow = (a: Buffer | null, b: Buffer | null | undefined) =>
    a === null ? !b : !!b && Buffer.compare(a, b) === 0;
  if (!sameRow(facts.firstRow, summary.firstKey?.row) || !sameRow(facts.lastRow, summary.lastKey?.row))
    throw corruptFile(name, 'footer', 'its first or last key is not the first or last entry of its blocks');
  return facts;
}
