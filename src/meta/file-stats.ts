/**
 * What the metadata knows of a file's data (DESIGN.md, "Chosen files"): its bytes and entries, and the
 * statistics recorded as it was written — its delete markers and the oldest and newest timestamp of its
 * entries — so that a selector chooses files without reading them (meta/selectors.ts).
 *
 * A tablet that shares a file (a split, an import over several tablets) records its share: bytes,
 * entries and deletes estimated in proportion, the timestamps of the whole file (still true bounds of any
 * share). A file written before the statistics existed has none: its figures are then only its size and
 * entries.
 */
import { z } from 'zod';

const count = z.number().int().nonnegative();
const timestamp = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** The statistics fields, optional: records of files written before them have none. */
export const fileStatsFields = {
  /** Delete markers among the entries (the tablet's share of them, like `entries`). */
  deletes: count.optional(),
  /** The oldest and newest timestamp of the file's entries. */
  oldestTs: timestamp.optional(),
  newestTs: timestamp.optional(),
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

export interface FileStats {
  deletes: number;
  oldestTs: number;
  newestTs: number;
}

/** The statistics of a file's figures, or undefined when it was written without them. */
export function statsOf(f: Partial<FileFigures>): FileStats | undefined {
  if (f.deletes === undefined || f.oldestTs === undefined || f.newestTs === undefined) return undefined;
  return { deletes: f.deletes, oldestTs: f.oldestTs, newestTs: f.newestTs };
}

/** The statistics fields to spread into a record (none when unknown). */
export function statsFields(stats: FileStats | undefined): Partial<FileStats> {
  return stats ? { deletes: stats.deletes, oldestTs: stats.oldestTs, newestTs: stats.newestTs } : {};
}

/**
 * A share of a file: bytes (at least one), entries and deletes in proportion `fraction`, the timestamps as
 * they are. `atLeastOne`: the share is known to hold an entry.
 */
export function shareFigures<F extends FileFigures>(f: F, fraction: number, atLeastOne = false): F {
  const floor = atLeastOne ? 1 : 0;
  const out: F = {
    ...f,
    size: Math.max(1, Math.round(f.size * fraction)),
    entries: Math.max(floor, Math.round(f.entries * fraction)),
  };
  if (f.deletes !== undefined) out.deletes = Math.min(out.entries, Math.round(f.deletes * fraction));
  return out;
}

/**
 * Two records of one file's shares as one (a merge, a second piece of an import): bytes, entries and
 * deletes add up, the timestamps span both; the statistics only when both have them.
 */
export function addFigures<F extends FileFigures>(a: F, b: FileFigures): F {
  const { deletes: _d, oldestTs: _o, newestTs: _n, ...rest } = a;
  const sa = statsOf(a);
  const sb = statsOf(b);
  return {
    ...rest,
    size: a.size + b.size,
    entries: a.entries + b.entries,
    ...statsFields(sa && sb ? joinStats([sa, sb]) : undefined),
  } as F;
}

/** The statistics of several files' data together (a split job's outputs): undefined unless all have them. */
export function joinStats(stats: readonly (FileStats | undefined)[]): FileStats | undefined {
  if (stats.length === 0 || stats.some((s) => s === undefined)) return undefined;
  const all = stats as FileStats[];
  return {
    deletes: all.reduce((n, s) => n + s.deletes, 0),
    oldestTs: Math.min(...all.map((s) => s.oldestTs)),
    newestTs: Math.max(...all.map((s) => s.newestTs)),
  };
}
