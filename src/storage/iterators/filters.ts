/**
 * Built-in user filters, chosen by name with JSON options. The registry is fixed at build time: a job
 * description names a filter and gives it data, never code, so no request can make a process load or
 * run anything else. Names are looked up as own properties only (`constructor`, `__proto__` are unknown).
 *
 * Every filter decides on the cell alone (row, family), never on timestamp or value: that is what lets
 * filters run in any compaction, partial or full, without changing what a scan with the same filters
 * sees (see stack.ts). Byte-string options are a UTF-8 string, `{ "hex": "00ff" }` or
 * `{ "base64": "AP8=" }`.
 */
import { z } from 'zod';
import { ExcError } from '../../errors.js';
import { LONE_SURROGATE, wellFormed } from '../../validate.js';
import type { Entry } from '../key.js';
import { rangeIsEmpty, rowInRange, type RowRange } from '../range.js';
import { BlockEntry } from '../rfile/block-entry.js';

export interface FilterSpec {
  name: string;
  options?: unknown;
}

/** Keeps an entry (true) or drops it (false). */
export type EntryPredicate = (e: Entry) => boolean;

export const MAX_FILTERS = 32;

const bytes = z
  .union([
    z.string().max(4096).refine(wellFormed, LONE_SURROGATE),
    z.strictObject({
      hex: z.string().regex(/^(?:[0-9a-fA-F]{2}){0,4096}$/, 'expected an even number of hex digits'),
    }),
    z.strictObject({
      // Canonical only: Node's decoder skips what is not base64 and the bits past the last byte, so a
      // typo would name other bytes than were meant, with nothing said (as ingest refuses it too).
      base64: z
        .string()
        .max(8192)
        .refine((s) => Buffer.from(s, 'base64').toString('base64') === s, 'expected base64 (with = padding)'),
    }),
  ])
  .transform((v) =>
    typeof v === 'string'
      ? Buffer.from(v, 'utf8')
      : 'hex' in v
        ? Buffer.from(v.hex, 'hex')
        : Buffer.from(v.base64, 'base64'),
  );
const byteList = z.array(bytes).min(1).max(1024);
/**
 * Row prefixes: an empty prefix matches every row, so `dropRowPrefix` with one would delete the whole
 * table and `keepRowPrefix` would keep everything: both are mistakes, refused rather than run.
 */
const prefixList = z
  .array(bytes.refine((b) => b.length > 0, 'an empty prefix matches every row'))
  .min(1)
  .max(1024);

/**
 * A row range that can select no row at all (start after end, or start = end without both ends
 * inclusive) is refused: `keepRowRange` with it would delete every row of every tablet it touches, which
 * is never what anyone asked for. A range is empty only by mistake.
 */
const rowRange = z
  .strictObject({
    start: bytes.optional(),
    startInclusive: z.boolean().optional(),
    end: bytes.optional(),
    endInclusive: z.boolean().optional(),
  })
  .refine((o) => !rangeIsEmpty(toRowRange(o)), {
    message:
      'the range is empty (start is after end, or equal to it without startInclusive and endInclusive): it would keep no row',
  });

interface FilterDefinition<S extends z.ZodType> {
  doc: string;
  options: S;
  build(options: z.output<S>): EntryPredicate;
}

function define<S extends z.ZodType>(d: FilterDefinition<S>): FilterDefinition<S> {
  return d;
}

const hasPrefix = (b: Buffer, prefix: Buffer): boolean =>
  b.length >= prefix.length && b.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;

/**
 * Whether an entry's column family is one of `families`. Per entry, so it compares bytes in place: no
 * string per entry, and no Key made for a BlockEntry (three Buffer slices); only the families of the
 * entry's length are compared.
 */
function familyIn(families: Buffer[]): (e: Entry) => boolean {
  const byLength = new Map<number, Buffer[]>();
  for (const f of families) byLength.set(f.length, [...(byLength.get(f.length) ?? []), f]);
  const matches = (bytes: Buffer, start: number, end: number): boolean =>
    byLength.get(end - start)?.some((f) => bytesEqual(bytes, start, f)) ?? false;
  return (e) => {
    if (e instanceof BlockEntry) return matches(e.block, e.familyStart, e.qualifierStart);
    const family = e.key.family;
    return matches(family, 0, family.length);
  };
}

/** Whether `bytes` holds `b` at `start` (the caller has checked that the lengths fit). */
function bytesEqual(bytes: Buffer, start: number, b: Buffer): boolean {
  for (let i = 0; i < b.length; i++) if (bytes[start + i] !== b[i]) return false;
  return true;
}

function toRowRange(o: {
  start?: Buffer;
  startInclusive?: boolean;
  end?: Buffer;
  endInclusive?: boolean;
}): RowRange {
  return { startRow: o.start, startInclusive: o.startInclusive, endRow: o.end, endInclusive: o.endInclusive };
}

/** The registry: name → documentation, option schema, predicate. */
export const FILTERS = {
  dropRowPrefix: define({
    doc: 'Drops the rows that start with any of `prefixes`.',
    options: z.strictObject({ prefixes: prefixList }),
    build:
      ({ prefixes }) =>
      (e) =>
        !prefixes.some((p) => hasPrefix(e.key.row, p)),
  }),
  keepRowPrefix: define({
    doc: 'Keeps only the rows that start with one of `prefixes`.',
    options: z.strictObject({ prefixes: prefixList }),
    build:
      ({ prefixes }) =>
      (e) =>
        prefixes.some((p) => hasPrefix(e.key.row, p)),
  }),
  dropFamily: define({
    doc: 'Drops the column families in `families`.',
    options: z.strictObject({ families: byteList }),
    build: ({ families }) => {
      const has = familyIn(families);
      return (e) => !has(e);
    },
  }),
  keepFamily: define({
    doc: 'Keeps only the column families in `families`.',
    options: z.strictObject({ families: byteList }),
    build: ({ families }) => familyIn(families),
  }),
  keepRowRange: define({
    doc: 'Keeps only the rows in [start, end) (or as `startInclusive` / `endInclusive` say; either end may be left out).',
    options: rowRange,
    build: (o) => {
      const range = toRowRange(o);
      return (e) => rowInRange(e.key.row, range);
    },
  }),
} as const;

export type FilterName = keyof typeof FILTERS;

const specSchema = z.strictObject({ name: z.string().min(1).max(100), options: z.unknown().optional() });

/** The registry as a plain lookup table, without the per-filter option types. */
const REGISTRY: Readonly<Record<string, FilterDefinition<z.ZodType>>> = FILTERS;

function definition(name: string): FilterDefinition<z.ZodType> | undefined {
  // Own properties only: `constructor`, `toString` or `__proto__` must not resolve to anything.
  return Object.prototype.hasOwnProperty.call(REGISTRY, name) ? REGISTRY[name] : undefined;
}

/**
 * Checks a list of filter specs (request validation): a list of at most {@link MAX_FILTERS} `{ name,
 * options }` objects naming built-in filters with valid options. Throws BAD_REQUEST naming the filter.
 */
export function validateFilters(filters: unknown): FilterSpec[] {
  return parseFilters(filters).map((f) => f.spec);
}

/**
 * One predicate for a list of filters (all must keep an entry); null when there are none. Checks the
 * list as validateFilters does, in the same pass that builds the predicates.
 */
export function compileFilters(filters: unknown): EntryPredicate | null {
  const predicates = parseFilters(filters).map((f) => f.def.build(f.options));
  if (predicates.length === 0) return null;
  if (predicates.length === 1) return predicates[0]!;
  return (e) => predicates.every((p) => p(e));
}

interface ParsedFilter {
  /** As given. */
  spec: FilterSpec;
  def: FilterDefinition<z.ZodType>;
  /** The options in their internal form (byte strings as Buffers). */
  options: unknown;
}

function parseFilters(filters: unknown): ParsedFilter[] {
  if (!Array.isArray(filters))
    throw new ExcError('BAD_REQUEST', 'filters: expected a list of { name, options }');
  if (filters.length > MAX_FILTERS)
    throw new ExcError('BAD_REQUEST', `filters: at most ${MAX_FILTERS} filters`);
  return filters.map((raw, i) => {
    const spec = specSchema.safeParse(raw);
    if (!spec.success) {
      throw new ExcError('BAD_REQUEST', `filter ${i}: expected { name, options }: ${issues(spec.error)}`, {
        details: { filter: i },
      });
    }
    const { name, options } = spec.data;
    const def = definition(name);
    if (!def) {
      throw new ExcError(
        'BAD_REQUEST',
        `filter ${i}: unknown filter ${JSON.stringify(name)} (built-in filters: ${Object.keys(FILTERS).join(', ')})`,
        { details: { filter: name } },
      );
    }
    const parsed = def.options.safeParse(options ?? {});
    if (!parsed.success) {
      throw new ExcError('BAD_REQUEST', `filter ${i} (${name}): bad options: ${issues(parsed.error)}`, {
        details: { filter: name },
      });
    }
    return { spec: options === undefined ? { name } : { name, options }, def, options: parsed.data };
  });
}

function issues(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((i) => `${i.path.length > 0 ? `${i.path.join('.')}: ` : ''}${i.message}`)
    .join('; ');
}
