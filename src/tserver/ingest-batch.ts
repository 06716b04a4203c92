/**
 * The file an ingested batch becomes: its entries in key order, with the batch's own order applied where
 * the keys cannot say it.
 *
 * Every entry the tablet server stamps gets the batch's one timestamp (HostedTablet.nextTimestamp), and at
 * equal timestamps a delete marker sorts before a put of its cell and hides it. So, for the entries the
 * server stamps:
 *
 *   - of a cell's entries before its last delete in the batch, none is written: the delete comes after
 *     them;
 *   - when a put of the cell follows that delete, the marker is written one millisecond earlier, at ts - 1:
 *     it still hides every version stamped before this batch (each batch's stamp is above every earlier
 *     one, here or on the tablet's earlier hosts, so ts - 1 is at least all of them) and no longer hides
 *     the put at ts.
 *
 * For every entry, stamped or not: of entries with identical keys (cell, timestamp, delete flag), the last
 * one in the batch wins. Entries with the writer's own timestamps keep them: their order is their
 * timestamps' (README, "Data model").
 */
import { compareKeys, type Entry, type Key } from '../storage/index.js';

export interface BatchEntry {
  entry: Entry;
  /** The tablet server gave it the batch's timestamp (the writer gave none). */
  stamped: boolean;
}

/** The batch's entries as its file holds them: sorted, without duplicates, in batch order (see above). */
export function batchFile(batch: readonly BatchEntry[]): Entry[] {
  const entries = inBatchOrder(batch);
  // Sort; of entries with identical keys the last one in the batch wins.
  const order = [...entries.keys()]
    .filter((i) => entries[i] !== null)
    .sort((a, b) => compareKeys(entries[a]!.key, entries[b]!.key) || b - a);
  const sorted: Entry[] = [];
  for (const i of order) {
    const e = entries[i]!;
    const last = sorted[sorted.length - 1];
    if (last && compareKeys(last.key, e.key) === 0) continue;
    sorted.push(e);
  }
  return sorted;
}

/** The batch with the stamped entries a later delete hides as null, and markers a put follows moved back. */
function inBatchOrder(batch: readonly BatchEntry[]): (Entry | null)[] {
  const plain = batch.map((b) => b.entry);
  if (!batch.some((b) => b.stamped && b.entry.key.deleted)) return plain;
  const ids = batch.map((b) => (b.stamped ? cellId(b.entry.key) : ''));
  const lastDelete = new Map<string, number>();
  batch.forEach((b, i) => {
    if (b.stamped && b.entry.key.deleted) lastDelete.set(ids[i]!, i);
  });
  const putAfter = new Set<string>();
  batch.forEach((b, i) => {
    const d = b.stamped && !b.entry.key.deleted ? lastDelete.get(ids[i]!) : undefined;
    if (d !== undefined && d < i) putAfter.add(ids[i]!);
  });
  return batch.map(({ entry, stamped }, i) => {
    const d = stamped ? lastDelete.get(ids[i]!) : undefined;
    if (d === undefined || i > d) return entry;
    if (i < d) return null;
    if (!putAfter.has(ids[i]!)) return entry;
    return { ...entry, key: { ...entry.key, timestamp: entry.key.timestamp - 1 } };
  });
}

function cellId(k: Key): string {
  return `${k.row.toString('hex')}:${k.family.toString('hex')}:${k.qualifier.toString('hex')}`;
}
