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

const qualifierOf = (e: Entry): Buffer =>
  e instanceof BlockEntry ? e.block.subarray(e.qualifierStart, e.valueStart) : e.key.qualifier;
const tsOf = (e: Entry): number => (e instanceof BlockEntry ? e.timestamp : e.key.timestamp);
const key = (b: Buffer): string => b.toString('latin1');
const latin1 = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

/** What the table iterators say of one family. */
interface FamilyRules {
  /** The combiner of the family's every qualifier, or null. */
  combiner: CombineOp | null;
  /** Combiners of single qualifiers (latin1), when any. */
  byQualifier: Map<string, CombineOp> | null;
  dropped: boolean;
  ttlMs: number | undefined;
  versions: number | undefined;
}

const NO_RULES: FamilyRules = {
  combiner: null,
  byQualifier: null,
  dropped: false,
  ttlMs: undefined,
  versions: undefined,
};

/**
 * The rules of an entry's family, remembered for the last family seen: the stack asks several questions
 * of every cell, and neighbouring cells mostly share a family, so most answers cost a comparison of a few
 * bytes rather than a string and a lookup.
 */
function familyRules(rules: Map<string, FamilyRules>): (e: Entry) => FamilyRules {
  let last: Buffer | null = null;
  let lastRules = NO_RULES;
  return (e) => {
    let bytes: Buffer, start: number, end: number;
    if (e instanceof BlockEntry) {
      bytes = e.block;
      start = e.familyStart;
      end = e.qualifierStart;
    } else {
      bytes = e.key.family;
      start = 0;
      end = bytes.length;
    }
    if (last !== null && last.length === end - start) {
      let i = 0;
      while (i < last.length && bytes[start + i] === last[i]) i++;
      if (i === last.length) return lastRules;
    }
    last = Buffer.from(bytes.subarray(start, end));
    lastRules = rules.get(key(last)) ?? NO_RULES;
    return lastRules;
  };
}

/** Null for none. */
export function compileTableIterators(list: readonly TableIterator[]): CompiledTableIterators | null {
  if (list.length === 0) return null;
  /** family (latin1) → its rules. */
  const families = new Map<string, FamilyRules>();
  const of = (family: string): FamilyRules => {
    const f = latin1(family);
    let r = families.get(f);
    if (!r) families.set(f, (r = { ...NO_RULES }));
    return r;
  };
  let combines = false;
  const qualifierPrefixes: Buffer[] = [];
  const valuePrefixes: Buffer[] = [];
  const ranges: { from: number; to: number }[] = [];
  for (const it of list) {
    switch (it.type) {
      case 'sum':
      case 'min':
      case 'max':
      case 'latest':
        combines = true;
        for (const c of it.columns) {
          const r = of(c.family);
          if (c.qualifier === undefined) r.combiner = it.type;
          else (r.byQualifier ??= new Map()).set(latin1(c.qualifier), it.type);
        }
        break;
      case 'dropFamily':
        for (const f of it.families) of(f).dropped = true;
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
        for (const f of it.families) {
          const r = of(f);
          r.ttlMs = Math.min(r.ttlMs ?? Infinity, it.ttlMs);
        }
        break;
      case 'versions':
        for (const f of it.families) {
          const r = of(f);
          r.versions = Math.min(r.versions ?? Infinity, it.versions);
        }
        break;
    }
  }
  const rulesOf = familyRules(families);
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
    combines,
    combinerOf: (e) => {
      if (!combines) return null;
      const r = rulesOf(e);
      return (r.byQualifier && r.byQualifier.get(key(qualifierOf(e)))) ?? r.combiner;
    },
    dropsCell: (e) =>
      (families.size > 0 && rulesOf(e).dropped) ||
      (qualifierPrefixes.length > 0 && qualifierPrefixes.some((p) => startsWith(qualifierOf(e), p))),
    dropsPut,
    versionsOf: (e) => (families.size === 0 ? undefined : rulesOf(e).versions),
    cutoffOf: (e, nowMs) => {
      if (families.size === 0) return -1;
      const ttl = rulesOf(e).ttlMs;
      return ttl === undefined ? -1 : nowMs - ttl;
    },
  };
}

/**
 * A value as an integer: decimal, an optional minus, no leading zero, at most 100 digits (undefined when
 * it is none). Up to 15 digits as a number (exact), more as a bigint.
 */
function integerOf(e: Entry): number | bigint | undefined {
  let v: Buffer, start: number, end: number;
  if (e instanceof BlockEntry) {
    v = e.block;
    start = e.valueStart;
    end = e.end;
  } else {
    v = e.value;
    start = 0;
    end = v.length;
  }
  const negative = end > start && v[start] === 0x2d;
  const first = negative ? start + 1 : start;
  const digits = end - first;
  if (digits < 1 || digits > 100) return undefined;
  if (v[first] === 0x30 && digits > 1) return undefined;
  let n = 0;
  for (let i = first; i < end; i++) {
    const d = v[i]! - 0x30;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  if (digits > 15) return BigInt(v.toString('latin1', start, end));
  return negative ? -n : n;
}

/**
 * The value of a combined cell's live puts, newest first (see the module comment). Exact at any size:
 * numbers while every figure is a safe integer, bigints from the first that is not.
 */
export function combineValues(op: CombineOp, puts: readonly Entry[]): Buffer {
  if (op === 'latest') return puts[0]!.value;
  let acc: number | bigint | undefined;
  for (const e of puts) {
    const n = integerOf(e);
    if (n === undefined) continue;
    if (acc === undefined) acc = n;
    else if (typeof acc === 'number' && typeof n === 'number') {
      if (op === 'sum') {
        const s = acc + n;
        acc = Number.isSafeInteger(s) ? s : BigInt(acc) + BigInt(n);
      } else acc = op === 'min' ? Math.min(acc, n) : Math.max(acc, n);
    } else {
      const a = BigInt(acc);
      const b = BigInt(n);
      acc = op === 'sum' ? a + b : op === 'min' ? (b < a ? b : a) : b > a ? b : a;
    }
  }
  return acc === undefined ? puts[0]!.value : Buffer.from(String(acc), 'latin1');
}
