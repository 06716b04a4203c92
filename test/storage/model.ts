/**
 * The in-memory model of what a merge through the iterator stack keeps, written independently of
 * src/storage: sort everything (by hex strings of the fields, which order like unsigned bytes), group
 * by cell, apply the rules of src/storage/iterators/stack.ts to each group as a whole:
 *
 *   - the cell's newest delete marker at T hides every entry at or below T;
 *   - of the live puts, one per timestamp (the smallest value); of those, the `versions` newest are
 *     kept; of those, puts older than nowMs - ttlMs are dropped, then puts a filter rejects;
 *   - with dropDeletes false, the newest marker is kept too (the smallest value among equal ones).
 */
import type { Entry, FilterSpec, RowRange } from '../../src/storage/index.js';
import type { FileStats } from '../../src/storage/index.js';

export interface ModelSettings {
  versions: number;
  ttlMs?: number | undefined;
  nowMs: number;
  filters: FilterSpec[];
  dropDeletes: boolean;
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

function cellOf(e: Entry): string {
  return `${hex(e.key.row)}/${hex(e.key.family)}/${hex(e.key.qualifier)}`;
}

/** Row, family, qualifier ascending; newest first; a delete before a put; then value. */
function modelCompare(a: Entry, b: Entry): number {
  const fields = (e: Entry): (string | number)[] => [
    hex(e.key.row),
    hex(e.key.family),
    hex(e.key.qualifier),
    -e.key.timestamp,
    e.key.deleted ? 0 : 1,
    hex(e.value),
  ];
  const x = fields(a);
  const y = fields(b);
  for (let i = 0; i < x.length; i++) {
    if (x[i]! < y[i]!) return -1;
    if (x[i]! > y[i]!) return 1;
  }
  return 0;
}

export function modelSort(entries: readonly Entry[]): Entry[] {
  return [...entries].sort(modelCompare);
}

function rowInModelRange(row: Uint8Array, r: RowRange): boolean {
  const h = hex(row);
  if (r.startRow !== undefined) {
    const s = hex(r.startRow);
    if (h < s || (h === s && r.startInclusive === false)) return false;
  }
  if (r.endRow !== undefined) {
    const e = hex(r.endRow);
    if (h > e || (h === e && r.endInclusive !== true)) return false;
  }
  return true;
}

/** The model's reading of the built-in filters, for string (UTF-8) options. */
function keptByFilters(filters: readonly FilterSpec[], e: Entry): boolean {
  const row = hex(e.key.row);
  const family = hex(e.key.family);
  const h = (s: string): string => Buffer.from(s, 'utf8').toString('hex');
  return filters.every((f) => {
    const o = (f.options ?? {}) as Record<string, unknown>;
    switch (f.name) {
      case 'dropRowPrefix':
        return !(o.prefixes as string[]).some((p) => row.startsWith(h(p)));
      case 'keepRowPrefix':
        return (o.prefixes as string[]).some((p) => row.startsWith(h(p)));
      case 'dropFamily':
        return !(o.families as string[]).map(h).includes(family);
      case 'keepFamily':
        return (o.families as string[]).map(h).includes(family);
      case 'keepRowRange':
        return rowInModelRange(e.key.row, {
          startRow: o.start === undefined ? undefined : Buffer.from(o.start as string),
          startInclusive: o.startInclusive as boolean | undefined,
          endRow: o.end === undefined ? undefined : Buffer.from(o.end as string),
          endInclusive: o.endInclusive as boolean | undefined,
        });
      default:
        throw new Error(`the model does not know filter ${f.name}`);
    }
  });
}

/** What a scan (or compaction) of `entries` with settings `s` over `range` returns, in order. */
export function modelScan(entries: readonly Entry[], s: ModelSettings, range: RowRange = {}): Entry[] {
  const sorted = modelSort(entries);
  const out: Entry[] = [];
  for (let i = 0; i < sorted.length;) {
    const cell = cellOf(sorted[i]!);
    let j = i;
    while (j < sorted.length && cellOf(sorted[j]!) === cell) j++;
    const group = sorted.slice(i, j);
    i = j;
    if (!rowInModelRange(group[0]!.key.row, range)) continue;
    const deletes = group.filter((e) => e.key.deleted);
    const newestDelete = deletes.length > 0 ? Math.max(...deletes.map((d) => d.key.timestamp)) : -1;
    // Sorted: the first put of each timestamp has its smallest value.
    const live = group.filter(
      (e, k) =>
        !e.key.deleted &&
        e.key.timestamp > newestDelete &&
        !(k > 0 && !group[k - 1]!.key.deleted && group[k - 1]!.key.timestamp === e.key.timestamp),
    );
    const kept = live
      .slice(0, s.versions)
      .filter((e) => s.ttlMs === undefined || e.key.timestamp >= s.nowMs - s.ttlMs)
      .filter((e) => keptByFilters(s.filters, e));
    out.push(...kept);
    if (!s.dropDeletes && deletes.length > 0) out.push(deletes[0]!);
  }
  return out;
}

/** One line per entry, for comparisons with readable diffs. */
export function show(entries: readonly Entry[]): string[] {
  return entries.map(
    (e) =>
      `${hex(e.key.row)}|${hex(e.key.family)}|${hex(e.key.qualifier)}|${e.key.timestamp}|${e.key.deleted ? 'DEL' : 'put'}|${hex(e.value)}`,
  );
}

/** What the writer's summary reports (FileStats). */
export type ModelStats = FileStats;

/** Families a block, and a file, count by name (FileStats). */
export const MODEL_MAX_FAMILIES = 16;

/**
 * The stats a file of `entries` reports (FileStats): undefined when it has none. Which families are
 * counted by name depends on the data blocks when there are more than 16: each block names the first 16
 * it meets and counts the rest together; placing a block adds its named families to the file's, a new
 * one only while the file names fewer than 16, and the rest to the file's others. `blocks`, the entries
 * of each data block in order, is needed only then (without it, such entries throw).
 */
export function modelStats(entries: readonly Entry[], blocks?: readonly number[]): ModelStats | undefined {
  if (entries.length === 0) return undefined;
  const timestamps = entries.map((e) => e.key.timestamp);
  const distinct = new Set(entries.map((e) => hex(e.key.family)));
  if (distinct.size > MODEL_MAX_FAMILIES && blocks === undefined)
    throw new Error(`the model needs the data blocks of entries of ${distinct.size} families`);
  const file = new Map<string, number>();
  let otherFamilies = 0;
  let at = 0;
  for (const count of blocks ?? [entries.length]) {
    const block = new Map<string, number>();
    for (const e of entries.slice(at, at + count)) {
      const family = hex(e.key.family);
      const n = block.get(family);
      if (n !== undefined) block.set(family, n + 1);
      else if (block.size < MODEL_MAX_FAMILIES) block.set(family, 1);
      else otherFamilies++;
    }
    at += count;
    // A Map iterates in insertion order: the order the block met its families.
    for (const [family, n] of block) {
      if (file.has(family) || file.size < MODEL_MAX_FAMILIES) file.set(family, (file.get(family) ?? 0) + n);
      else otherFamilies += n;
    }
  }
  if (at !== entries.length) throw new Error(`the blocks hold ${at} entries, not ${entries.length}`);
  const bytes = (f: (e: Entry) => number): number => entries.reduce((sum, e) => sum + f(e), 0);
  return {
    deletes: entries.filter((e) => e.key.deleted).length,
    oldestTs: Math.min(...timestamps),
    newestTs: Math.max(...timestamps),
    keyBytes: bytes((e) => e.key.row.length + e.key.family.length + e.key.qualifier.length),
    valueBytes: bytes((e) => e.value.length),
    families: [...file].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    otherFamilies,
  };
}
