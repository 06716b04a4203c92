/**
 * Selectors (DESIGN.md, "Chosen files"): which of a tablet's files a user compaction rewrites. Built in
 * and named, never loaded code; each reads only the figures the metadata holds of a file
 * (meta/file-stats.ts), never its data. A request with several selectors rewrites the files every one of
 * them chooses.
 *
 *   all                  every file (the default)
 *   smaller-than:<size>  the files whose share in the tablet is smaller than <size> (64M, 1G, 4096)
 *   older-than:<age>     the files whose newest entry is older than <age> (7d, 12h) before the request
 *   deletes-above:<r>    every file of a tablet whose files hold more than <r> delete markers per entry
 *                        (0 < r < 1), so the compaction takes all of them and drops the markers with
 *                        what they hide (Accumulo's TooManyDeletesSelector); none of any other tablet
 *
 * A file written before statistics were recorded has no timestamps and counts no deletes: `older-than`
 * never chooses it, `deletes-above` counts its entries only.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import type { FileFigures } from './file-stats.js';
import { parseDuration, parseSize } from './table-config.js';

export const selectorSchema = z.discriminatedUnion('name', [
  z.object({ name: z.literal('all') }).strict(),
  z.object({ name: z.literal('smaller-than'), bytes: z.number().int().positive() }).strict(),
  z.object({ name: z.literal('older-than'), ms: z.number().int().positive() }).strict(),
  z.object({ name: z.literal('deletes-above'), ratio: z.number().gt(0).lt(1) }).strict(),
]);
export type Selector = z.infer<typeof selectorSchema>;

export const SELECTOR_NAMES = ['all', 'smaller-than', 'older-than', 'deletes-above'] as const;

/** The most selectors one request may name. */
export const MAX_SELECTORS = 8;

export const selectorsSchema = z.array(selectorSchema).max(MAX_SELECTORS);

/** A selector as the CLI takes it (`smaller-than:64M`); BAD_REQUEST naming what is wrong. */
export function parseSelector(text: string): Selector {
  const colon = text.indexOf(':');
  const name = colon < 0 ? text : text.slice(0, colon);
  const arg = colon < 0 ? undefined : text.slice(colon + 1);
  const needs = (what: string): string => {
    if (arg === undefined || arg === '')
      throw new ExcError('BAD_REQUEST', `selector ${name} needs ${what}: ${name}:<${what}>`);
    return arg;
  };
  const checked = (s: Selector): Selector => {
    const r = selectorSchema.safeParse(s);
    if (!r.success)
      throw new ExcError('BAD_REQUEST', `selector ${JSON.stringify(text)}: ${r.error.issues[0]!.message}`);
    return r.data;
  };
  switch (name) {
    case 'all':
      if (arg !== undefined) throw new ExcError('BAD_REQUEST', 'selector all takes no argument');
      return { name: 'all' };
    case 'smaller-than':
      return checked({ name, bytes: parseSize(needs('size')) });
    case 'older-than':
      return checked({ name, ms: parseDuration(needs('age')) });
    case 'deletes-above': {
      const ratio = Number(needs('ratio'));
      if (!Number.isFinite(ratio))
        throw new ExcError('BAD_REQUEST', `selector deletes-above: not a ratio: ${JSON.stringify(arg)}`);
      return checked({ name, ratio });
    }
    default:
      throw new ExcError(
        'BAD_REQUEST',
        `unknown selector ${JSON.stringify(name)}: expected one of ${SELECTOR_NAMES.join(', ')}`,
      );
  }
}

/** The selector as the CLI takes it, in the largest unit that keeps its figure whole. */
export function showSelector(s: Selector): string {
  switch (s.name) {
    case 'all':
      return 'all';
    case 'smaller-than':
      return `smaller-than:${inUnits(
        s.bytes,
        [
          ['G', 1 << 30],
          ['M', 1 << 20],
          ['K', 1 << 10],
        ],
        '',
      )}`;
    case 'older-than':
      return `older-than:${inUnits(
        s.ms,
        [
          ['d', 86_400_000],
          ['h', 3_600_000],
          ['m', 60_000],
          ['s', 1_000],
        ],
        'ms',
      )}`;
    case 'deletes-above':
      return `deletes-above:${s.ratio}`;
  }
}

function inUnits(n: number, units: [string, number][], base: string): string {
  const unit = units.find(([, size]) => n % size === 0);
  return unit ? `${n / unit[1]}${unit[0]}` : `${n}${base}`;
}

/**
 * The files of a tablet that `selectors` choose, sorted; `requestedAt` is the reference time of
 * `older-than` (the request's, so every tablet and every retry choose alike).
 */
export function chooseFiles(
  files: ReadonlyMap<string, FileFigures>,
  selectors: readonly Selector[],
  requestedAt: number,
): string[] {
  let chosen = [...files.keys()].sort();
  for (const s of selectors) {
    switch (s.name) {
      case 'all':
        break;
      case 'smaller-than':
        chosen = chosen.filter((f) => files.get(f)!.size < s.bytes);
        break;
      case 'older-than': {
        const before = requestedAt - s.ms;
        // A file without statistics has no newest timestamp: never chosen.
        chosen = chosen.filter((f) => (files.get(f)!.newestTs ?? Infinity) < before);
        break;
      }
      case 'deletes-above': {
        let entries = 0;
        let deletes = 0;
        for (const f of files.values()) {
          entries += f.entries;
          deletes += f.deletes ?? 0;
        }
        if (!(entries > 0 && deletes / entries > s.ratio)) chosen = [];
        break;
      }
    }
  }
  return chosen;
}

/** Whether the selectors choose every file whatever the files are (none given, or only `all`). */
export function selectsAll(selectors: readonly Selector[] | undefined): boolean {
  return (selectors ?? []).every((s) => s.name === 'all');
}
