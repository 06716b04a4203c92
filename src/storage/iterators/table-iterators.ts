/**
 * Table iterators (DESIGN.md, "Table iterators"): built-in, named rules a table configures, which hold at
 * every scan and every compaction of it — never loaded code. A compactor gets them late-bound, in its
 * reservation's settings; a running compaction keeps the ones it was reserved with.
 *
 *   sum | min | max | latest  { columns: [{ family, qualifier? }] }   combiners (see below)
 *   dropFamily                { families: [...] }                      drop the puts of these families
 *   dropQualifierPrefix       { prefixes: [...] }                      ... of cells whose qualifier starts so
 *   dropValuePrefix           { prefixes: [...] }                      ... whose value starts so
 *   keepTimestamps            { from?, to? }                           keep only puts with from <= ts <= to
 *   ageOff                    { families: [...], ttlMs }               age-off for these families
 *   versions                  { families: [...], versions }            versions to keep for these families
 *
 * Each has a `name` (the operator's, unique in the table) and its `type`. Families and qualifiers are
 * UTF-8 text. Order (stack.ts gives the reasons): delete markers first — they are never filtered, aged
 * off or combined — then, in a combined cell, the combination; in any other, versions (the table's or a
 * `versions` iterator's), age-off (the table's `ttl` or an `ageOff`'s, whichever drops more), the
 * filters, the user compaction's filters.
 *
 * Combiners. The live puts of a combined cell (those newer than its newest delete marker) become one
 * entry: the newest put's key, the sum, the smallest, the largest or the newest of their values. Values
 * are integers written in decimal (`-12`, `40`); a value that is not one is left out of sum, min and max
 * (the newest is kept as it is when none is). Puts are combined only where nothing can still change what
 * they sum to: in scans and in compactions of all of a tablet's files that drop delete markers; a
 * partial compaction keeps a combined cell's puts as they are (a marker in a file it did not read may
 * hide some of them). An age-off of a combined cell's family drops it when its newest put ages off. The
 * value and timestamp filters do not apply to combined cells (a partial sum is no value of the cell); the
 * family and qualifier filters do. The value and timestamp filters decide per put, after the versions
 * rule, so they too run only where every file is read (scans, compactions that drop deletes): a partial
 * compaction dropping a cell's newest put would let an older one in a file it did not read show again.
 */
import type { Entry } from '../key.js';
import { BlockEntry } from '../rfile/block-entry.js';
import type { TableIterator } from '../../table-iterators.js';

export {
  MAX_TABLE_ITERATORS,
  TABLE_ITERATOR_TYPES,
  tableIteratorSchema,
  tableIteratorsSchema,
  validateTableIterators,
  type TableIterator,
} from '../../table-iterators.js';

export type CombineOp = 'sum' | 'min' | 'max' | 'latest';

/** What the stack runs on (stack.ts): per cell, and per kept put. */
export interface CompiledTableIterators {
  /** Whether any cell is combined. */
  combines: boolean;
  /** The combiner of a cell (by its first entry), or null. */
  combinerOf(e: Entry): CombineOp | null;
  /** Whether the puts of the cell are dropped (family and qualifier filters). */
  dropsCell(e: Entry): boolean;
  /** Whether a kept put of a cell not combined is dropped (value and timestamp filters). */
  dropsPut: ((e: Entry) => boolean) | null;
  /** Versions for the cell's family, or undefined: the table's. */
  versionsOf(e: Entry): number | undefined;
  /** The age-off cutoff of the cell's family at `nowMs` (-1: none), beside the table's. */
  cutoffOf(e: Entry, nowMs: number): number;
}

const familyOf = (e: Entry): Buffer =>
  e instanceof BlockEntry ? e.block.subarray(e.familyStart, e.qualifierStart) : e.key.family;
const qualifierOf = (e: Entry): Buffer =>
  e instanceof BlockEntry ? e.block.subarray(e.qualifierStart, e.valueStart) : e.key.qualifier;
const tsOf = (e: Entry): number => (e instanceof BlockEntry ? e.timestamp : e.key.timestamp);
const key = (b: Buffer): string => b.toString('latin1');
const latin1 = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

/** Null for none. */
export function compileTableIterators(list: readonly TableIterator[]): CompiledTableIterators | null {
  if (list.length === 0) return null;
  /** family → (qualifier or '' for every qualifier) → op. */
  const combiners = new Map<string, Map<string | null, CombineOp>>();
  const dropFamilies = new Set<string>();
  const qualifierPrefixes: Buffer[] = [];
  const valuePrefixes: Buffer[] = [];
  const ranges: { from: number; to: number }[] = [];
  const ttls = new Map<string, number>();
  const versions = new Map<string, number>();
  for (const it of list) {
    switch (it.type) {
      case 'sum':
      case 'min':
      case 'max':
      case 'latest':
        for (const c of it.columns) {
          const byQualifier = combiners.get(latin1(c.family)) ?? new Map<string | null, CombineOp>();
          byQualifier.set(c.qualifier === undefined ? null : latin1(c.qualifier), it.type);
          combiners.set(latin1(c.family), byQualifier);
        }
        break;
      case 'dropFamily':
        for (const f of it.families) dropFamilies.add(latin1(f));
        break;
      case 'dropQualifierPrefix':
        qualifierPrefixes.push(...it.prefixes.map((p) => Buffer.from(p)));
        break;
      case 'dropValuePrefix':
        valuePrefixes.push(...it.prefixes.map((p) => Buffer.from(p)));
        break;
      case 'keepTimestamps':
        ranges.push({ from: it.from ?? 0, to: it.to ?? Number.MAX_SAFE_INTEGER });
        break;
      case 'ageOff':
        for (const f of it.families) ttls.set(latin1(f), Math.min(ttls.get(latin1(f)) ?? Infinity, it.ttlMs));
        break;
      case 'versions':
        for (const f of it.families)
          versions.set(latin1(f), Math.min(versions.get(latin1(f)) ?? Infinity, it.versions));
        break;
    }
  }
  const startsWith = (b: Buffer, p: Buffer) =>
    b.length >= p.length && b.compare(p, 0, p.length, 0, p.length) === 0;
  const dropsPut =
    valuePrefixes.length === 0 && ranges.length === 0
      ? null
      : (e: Entry): boolean => {
          if (valuePrefixes.some((p) => startsWith(e.value, p))) return true;
          const t = tsOf(e);
          return ranges.some((r) => t < r.from || t > r.to);
        };
  return {
    combines: combiners.size > 0,
    combinerOf: (e) => {
      if (combiners.size === 0) return null;
      const byQualifier = combiners.get(key(familyOf(e)));
      if (!byQualifier) return null;
      return byQualifier.get(key(qualifierOf(e))) ?? byQualifier.get(null) ?? null;
    },
    dropsCell: (e) =>
      (dropFamilies.size > 0 && dropFamilies.has(key(familyOf(e)))) ||
      (qualifierPrefixes.length > 0 && qualifierPrefixes.some((p) => startsWith(qualifierOf(e), p))),
    dropsPut,
    versionsOf: (e) => (versions.size === 0 ? undefined : versions.get(key(familyOf(e)))),
    cutoffOf: (e, nowMs) => {
      if (ttls.size === 0) return -1;
      const ttl = ttls.get(key(familyOf(e)));
      return ttl === undefined ? -1 : nowMs - ttl;
    },
  };
}

const INTEGER = /^-?(?:0|[1-9][0-9]{0,99})$/;

/** The value of a combined cell's live puts, newest first (see the module comment). */
export function combineValues(op: CombineOp, values: readonly Buffer[]): Buffer {
  if (op === 'latest') return values[0]!;
  let acc: bigint | undefined;
  for (const v of values) {
    const s = v.toString('latin1');
    if (!INTEGER.test(s)) continue;
    const n = BigInt(s);
    if (acc === undefined) acc = n;
    else if (op === 'sum') acc += n;
    else if (op === 'min') acc = n < acc ? n : acc;
    else acc = n > acc ? n : acc;
  }
  return acc === undefined ? values[0]! : Buffer.from(acc.toString(), 'latin1');
}
