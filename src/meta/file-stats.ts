/**
 * What the metadata knows of a file's data (DESIGN.md, "Chosen files" and "Summaries"): its bytes and
 * entries, and the statistics recorded as it was written — its delete markers, the oldest and newest
 * timestamp of its entries, the bytes of its keys and values, and its entries per column family (at most
 * {@link MAX_FAMILIES}, the rest counted together) — so that selectors and summaries read no file.
 *
 * A tablet that shares a file (a split, an import over several tablets, a hold) records its share: the
 * counts estimated in proportion to bytes (and the record marked `estimated`), the timestamps of the whole
 * file (still true bounds of any share). A file written before the statistics existed has none.
 */
import { z } from 'zod';

const count = z.number().int().nonnegative();
const timestamp = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** Families a file's figures name one by one; the entries of any other are counted together. */
export const MAX_FAMILIES = 16;

const familyHex = z
  .string()
  .max(65_536)
  .regex(/^(?:[0-9a-f]{2})*$/, "expected a family's bytes in lower-case hex");

/** The statistics fields, optional: records of files written before them have none. */
export const fileStatsFields = {
  /** Delete markers among the entries (the tablet's share of them, like `entries`). */
  deletes: count.optional(),
  /** The oldest and newest timestamp of the file's entries. */
  oldestTs: timestamp.optional(),
  newestTs: timestamp.optional(),
  /** Bytes of the entries' keys (row, family, qualifier) and of their values. */
  keyBytes: count.optional(),
  valueBytes: count.optional(),
  /** Entries per family, [family in hex, entries], by family; the rest in `otherFamilies`. */
  families: z
    .array(z.tuple([familyHex, count]))
    .max(MAX_FAMILIES)
    .optional(),
  otherFamilies: count.optional(),
};

/** A file's figures as its writer reports them (a commit, a split job's part, an ingest flush). */
export const fileFiguresSchema = z
  .object({ size: count, entries: count, ...fileStatsFields })
  .refine((f) => f.oldestTs === undefined || f.newestTs === undefined || f.oldestTs <= f.newestTs, {
    message: 'oldestTs must not be after newestTs',
  })
  .refine((f) => f.deletes === undefined || f.deletes <= f.entries, {
    message: 'deletes must not be more than entries',
  });
export type FileFigures = z.infer<typeof fileFiguresSchema>;

type StatFields = Omit<FileFigures, 'size' | 'entries'>;
const STAT_KEYS = [
  'deletes',
  'oldestTs',
  'newestTs',
  'keyBytes',
  'valueBytes',
  'families',
  'otherFamilies',
] as const satisfies readonly (keyof StatFields)[];

/** The statistics fields of `from` (a writer's summary stats, another record), to spread into a record. */
export function statsFields(from: Partial<StatFields> | undefined): StatFields {
  const out: Record<string, unknown> = {};
  if (from) for (const k of STAT_KEYS) if (from[k] !== undefined) out[k] = from[k];
  return out;
}

/**
 * A share of a file: bytes (at least one), entries and the other counts in proportion `fraction`
 * (`estimated` unless it is the whole), the timestamps as they are. `atLeastOne`: the share is known to
 * hold an entry.
 */
export function shareFigures<F extends FileFigures & { estimated?: boolean }>(
  f: F,
  fraction: number,
  atLeastOne = false,
): F {
  const part = (n: number) => Math.round(n * fraction);
  const out: F = {
    ...f,
    size: Math.max(1, part(f.size)),
    entries: Math.max(atLeastOne ? 1 : 0, part(f.entries)),
  };
  if (f.deletes !== undefined) out.deletes = Math.min(out.entries, part(f.deletes));
  if (f.keyBytes !== undefined) out.keyBytes = part(f.keyBytes);
  if (f.valueBytes !== undefined) out.valueBytes = part(f.valueBytes);
  if (f.families !== undefined) out.families = f.families.map(([family, n]) => [family, part(n)]);
  if (f.otherFamilies !== undefined) out.otherFamilies = part(f.otherFamilies);
  if (fraction !== 1) out.estimated = true;
  return out;
}

/**
 * Two records of one file's shares as one (a merge, a second piece of an import): the counts add up, the
 * timestamps span both, families join (beyond {@link MAX_FAMILIES}, into `otherFamilies`); each
 * statistic only when both have it.
 */
export function addFigures<F extends FileFigures & { estimated?: boolean }>(
  a: F,
  b: FileFigures & { estimated?: boolean },
): F {
  const out = { ...a, size: a.size + b.size, entries: a.entries + b.entries } as F;
  for (const k of STAT_KEYS) delete out[k];
  const both = <K extends keyof StatFields>(k: K): boolean => a[k] !== undefined && b[k] !== undefined;
  if (both('deletes')) out.deletes = a.deletes! + b.deletes!;
  if (both('oldestTs') && both('newestTs')) {
    out.oldestTs = Math.min(a.oldestTs!, b.oldestTs!);
    out.newestTs = Math.max(a.newestTs!, b.newestTs!);
  }
  if (both('keyBytes')) out.keyBytes = a.keyBytes! + b.keyBytes!;
  if (both('valueBytes')) out.valueBytes = a.valueBytes! + b.valueBytes!;
  if (both('families') && both('otherFamilies')) {
    const joined = joinFamilies([a, b], MAX_FAMILIES);
    out.families = joined.families;
    out.otherFamilies = joined.otherFamilies;
  }
  if (a.estimated || b.estimated) out.estimated = true;
  return out;
}

/**
 * Entries per family of several records together: the families of the first records first, up to
 * `limit` (Infinity: all), the entries of the rest in `otherFamilies`; sorted by family.
 */
export function joinFamilies(
  records: readonly Pick<FileFigures, 'families' | 'otherFamilies'>[],
  limit: number,
): { families: [string, number][]; otherFamilies: number } {
  const counts = new Map<string, number>();
  let other = 0;
  for (const r of records) {
    other += r.otherFamilies ?? 0;
    for (const [family, n] of r.families ?? []) {
      const had = counts.get(family);
      if (had !== undefined) counts.set(family, had + n);
      else if (counts.size < limit) counts.set(family, n);
      else other += n;
    }
  }
  const families = [...counts].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  return { families, otherFamilies: other };
}
