/**
 * The iterator stack: merge, deletes, versions, age-off, filters — for compactions and for scans.
 *
 * The merge presents every entry of the sources in order (compareEntries): cell by cell (row, family,
 * qualifier), and within a cell newest first, a delete marker before a put of the same timestamp. For
 * each cell, in that order, the rules are:
 *
 *   1. Deletes. A delete marker at T hides every entry of its cell with a timestamp <= T. Entries come
 *      newest first, so that is every entry after the cell's first marker; they are dropped, later
 *      markers included (they can only hide what the first one hides). The first marker itself is kept
 *      when `dropDeletes` is false — a partial compaction, whose marker must go on hiding versions in
 *      the files it did not read (DESIGN.md invariant 6) — and dropped when it is true (a compaction of
 *      all the tablet's files, or a scan).
 *   2. Versions. A put with the timestamp of the put before it in its cell has its key: it is another
 *      copy of that version (the same entry in two files) or another value written at the same instant,
 *      which sorts after it. It is dropped and not counted: one version per timestamp, the smallest
 *      value's. Of the puts left, the `versions` newest are kept; the others are dropped.
 *   3. Age-off. Of those, puts with timestamp < nowMs - ttlMs are dropped.
 *   4. Filters. Of those, puts that a filter rejects are dropped.
 *
 * Delete markers never meet rules 2-4: dropping a marker because of its age or its row would let older
 * versions in other files show again.
 *
 * Why any subset of a tablet's files can be compacted this way without changing what a scan of all of
 * them sees (invariants 1 and 6; test/storage/compaction.property.test.ts tries to break it):
 *   - a hidden put stays hidden: the first marker of the subset is kept, and it hides at least what the
 *     dropped ones hid;
 *   - a put that is among the N newest live puts of its cell over all files is among the N newest live
 *     puts of its cell in any subset holding it (a marker elsewhere hides a suffix of the cell's puts);
 *     counting timestamps rather than puts keeps this true, and the value kept for a timestamp is the
 *     smallest in the subset, so the smallest overall still wins when the output meets the other files;
 *   - age-off drops a suffix of a cell's puts, so it commutes with versioning, and since nowMs only grows
 *     (the tablet's time, meta/tablet.ts tabletTime: never behind a committed compaction's), what it
 *     drops now would be dropped by every later scan;
 *   - the built-in filters decide per cell (filters.ts), so they commute with versioning; a scan must use
 *     the same filters as the compactions for its result not to depend on which files were compacted.
 *
 * A full compaction applies the deletes and forgets them, as in Accumulo: a put written after it with a
 * timestamp at or below a forgotten marker is visible. Timestamps assigned at ingest (the tablet's time,
 * HostedTablet.nextTimestamp) come after every earlier batch's, on any host; a client that
 * gives its own timestamps takes that on itself.
 */
import { batchesOf, flatten, type BatchSource } from '../batches.js';
import { formatKey, type Entry } from '../key.js';
import { BLOCK_ENTRY_OPS, ENTRY_OPS, entryOrder, type EntryOps } from '../order.js';
import type { BlockEntry } from '../rfile/block-entry.js';
import { ExcError } from '../../errors.js';
import { mergeBatches, type MergeStats } from './merge.js';
import { mergeBlockBatches, type BlockAccept } from './merge-blocks.js';
import { combineBatches } from './combine.js';
import { compileSettings, type CompiledSettings, type IteratorSettings } from './settings.js';

/**
 * The rules above as a per-entry decision: `accept(e)`, called for each entry in merged order, says
 * whether it is kept. The closure carries the state of the current cell: its first entry, whether a
 * marker has been seen, how many live versions and the last of them.
 */
export function cellRules<T extends Entry>(
  s: CompiledSettings,
  ops: EntryOps<T>,
): (e: T, sameCell?: boolean) => boolean {
  const { cutoff, filter, dropDeletes, table, nowMs } = s;
  const { sameCell, isDelete, timestamp, sameTimestamp } = ops;
  let cell: T | null = null;
  let hidden = false;
  let seen = 0;
  /** The cell's last put counted as a version. */
  let counted: T | null = null;
  // The cell's table iterators (table-iterators.ts): its versions and cutoff, whether it is combined
  // (every live put is kept, for the combination) or its puts dropped.
  let versions = s.versions;
  let cellCutoff = cutoff;
  let combined = false;
  let dropped = false;
  // The value and timestamp filters decide per put, after the versions rule: in a partial compaction
  // they could drop the newest version of a cell and let an older one in a file it did not read show
  // again. They drop puts only where every file is read (scans, compactions that drop deletes).
  const dropsPut = s.combine ? (table?.dropsPut ?? null) : null;
  // `same`, when the merge knows it (mergeBlockBatches), says whether e has the previous entry's cell,
  // which is the current cell: the comparison is then skipped.
  return (e: T, same?: boolean): boolean => {
    if (cell === null || !(same ?? sameCell(cell, e))) {
      cell = e;
      hidden = false;
      seen = 0;
      counted = null;
      if (table !== null) {
        versions = table.versionsOf(e) ?? s.versions;
        cellCutoff = Math.max(cutoff, table.cutoffOf(e, nowMs));
        combined = table.combinerOf(e) !== null;
        dropped = table.dropsCell(e);
      }
    }
    if (hidden) return false;
    if (isDelete(e)) {
      hidden = true;
      return !dropDeletes;
    }
    if (dropped) return false;
    if (combined) return true;
    if (seen >= versions) return false;
    // Its key is the last counted put's: the same version again (rule 2).
    if (seen > 0 && sameTimestamp(counted!, e)) return false;
    seen++;
    counted = e;
    // Timestamps are never negative: without a TTL (cutoff -1) or with one longer than the clock's
    // reading, nothing is aged off, and the timestamp is not even read.
    if (cellCutoff > 0 && timestamp(e) < cellCutoff) return false;
    if (dropsPut !== null && dropsPut(e)) return false;
    return filter === null || filter(e);
  };
}

export interface StackOptions<T extends Entry> {
  stats?: MergeStats;
  signal?: AbortSignal | undefined;
  /** How to compare and inspect the entries; BLOCK_ENTRY_OPS for file scans. Default ENTRY_OPS (any entries). */
  ops?: EntryOps<T>;
}

/**
 * The stack over batch sources (file scans): batches of kept entries. The settings are checked and
 * compiled by the caller's entry point (compileSettings), once.
 */
export function iteratorStackBatches<T extends Entry = Entry>(
  sources: readonly BatchSource<T>[],
  settings: CompiledSettings,
  options: StackOptions<T> = {},
): AsyncGenerator<Entry[]> {
  const ops: EntryOps<T> = options.ops ?? ENTRY_OPS;
  const accept = cellRules(settings, ops);
  let merged: AsyncGenerator<T[]>;
  if (ops === (BLOCK_ENTRY_OPS as EntryOps<Entry>)) {
    // File blocks: the merge with offset-value codes (same output, fewer byte comparisons).
    const blockSources = sources as readonly BatchSource<BlockEntry>[];
    merged = mergeBlockBatches(blockSources, accept as unknown as BlockAccept, {
      stats: options.stats,
      signal: options.signal,
    }) as AsyncGenerator<T[]>;
  } else {
    merged = mergeBatches(sources, accept, {
      stats: options.stats,
      signal: options.signal,
      compare: ops.compare,
    });
  }
  // Combined cells come out as one plain entry each (combine.ts): callers take any Entry.
  const table = settings.table;
  return table !== null && settings.combine && table.combines
    ? combineBatches(merged, table, settings)
    : merged;
}

/**
 * The stack over sorted entry sources: merge + deletes + versions + age-off + filters. Each source must
 * be sorted by compareEntries; one that is not fails with BAD_REQUEST. Throws BAD_REQUEST at once for
 * bad settings.
 */
export function iteratorStack(
  sources: AsyncIterable<Entry>[],
  settings: IteratorSettings,
): AsyncIterable<Entry> {
  const compiled = compileSettings(settings);
  const batches = sources.map((s, i) => checkedOrder(batchesOf(s), i));
  return flatten(iteratorStackBatches(batches, compiled));
}

async function* checkedOrder(batches: AsyncIterable<Entry[]>, source: number): AsyncGenerator<Entry[]> {
  let last: Entry | null = null;
  for await (const batch of batches) {
    for (const e of batch) {
      if (last !== null && entryOrder(last, e) > 0) {
        throw new ExcError(
          'BAD_REQUEST',
          `source ${source} is out of order: ${formatKey(e.key)} after ${formatKey(last.key)}`,
        );
      }
      last = e;
    }
    yield batch;
  }
}
