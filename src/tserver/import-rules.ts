/**
 * What a bulk import does to one tablet (DESIGN.md, "Bulk import"): pure, decided from the tablet as its
 * server holds it and the files' profiles (their indexes). The I/O is bulk-import.ts.
 *
 *   - An import is recorded under `import.<id>` with the rows of the tablet it was applied to
 *     (meta/ingest-ids.ts): a split copies the record to both daughters, a merge joins them. Rows already
 *     recorded are never applied again; a tablet that holds some (a merge of one that applied the import
 *     and one that did not) reads the files in the other rows only (a fence: meta/tablet.ts).
 *   - Each file is added as the tablet's share of it, estimated from its index (a file usually spans
 *     several tablets, and each reads its own rows). A file none of whose rows are the tablet's is not
 *     added. A merged tablet may take two pieces of one import, one per tablet it was merged from: the
 *     second widens the file's fence to the rows of both (it never replaces the first's).
 *   - A compaction that drops delete markers (it had all of the tablet's files) was reserved on the
 *     deletes applied before it. An imported entry as old as its reference time may be one of those a
 *     marker hides; added while the compaction runs, it would show once the compaction commits without
 *     the marker. Such an import waits (IMPORT_WAITING, retried by the client) until those compactions
 *     end, and none like them is reserved meanwhile (HostedTablet.holdDeletes).
 *   - The tablet's clock moves up to the newest imported timestamp (not beyond a minute ahead of its
 *     server's clock), so an entry written after the import is stamped after every imported one: a delete
 *     sent after an import hides what it imported.
 */
import { ingestRecordValue, recordApplied, IMPORT_PREFIX, type IngestRecord } from '../meta/ingest-ids.js';
import {
  coversRows,
  intersectRows,
  isEmptyRange,
  joinRows,
  rowsOutside,
  sameRows,
  type HexRange,
} from '../meta/rows.js';
import { addFigures, shareFigures, statsFields, type FileFigures } from '../meta/file-stats.js';
import { rowsOf, type FileMeta, type TabletMeta } from '../meta/tablet.js';
import { bytesWithin, rowSpans, type FileProfile } from '../storage/index.js';

/**
 * A file of an import as the client verified it (its statistics, where the client sent them), with its
 * size and profile as this server read them.
 */
export type ImportedFile = FileFigures & {
  name: string;
  oldestTs: number;
  newestTs: number;
  profile: FileProfile;
};

export type ImportDecision =
  | { kind: 'duplicate' }
  | { kind: 'wait'; ecids: string[] }
  | {
      kind: 'apply';
      files: Map<string, FileMeta>;
      record: IngestRecord;
      /** The record as it was (the mutation's condition): undefined when absent. */
      before: IngestRecord | undefined;
      time: number;
    };

/** How far ahead of its server's clock an import may move a tablet's clock. */
export const IMPORT_CLOCK_AHEAD_MS = 60_000;

export const importRecordId = (importId: string): string => `${IMPORT_PREFIX}${importId}`;

/**
 * The compactions of the tablet that drop delete markers reserved at or after `oldestTs` (their reference
 * time): reservations, split jobs and holds (the share of a sibling's job reserved before a split, whose
 * settings this tablet does not see: counted alike).
 */
export function importConflicts(meta: TabletMeta, oldestTs: number): string[] {
  const out: string[] = [];
  for (const [ecid, r] of meta.reservations)
    if (r.settings.dropDeletes && r.settings.nowMs >= oldestTs) out.push(ecid);
  for (const [id, s] of meta.splits)
    if (s.settings.dropDeletes && s.settings.nowMs >= oldestTs) out.push(`split:${id}`);
  for (const [ecid, h] of meta.holds) if (h.nowMs >= oldestTs) out.push(ecid);
  return out;
}

/**
 * The tablet's share of a file within `rows`: bytes from its index, entries and deletes in proportion,
 * the file's timestamps (meta/file-stats.ts).
 */
export function shareOf(file: ImportedFile, rows: readonly HexRange[]): FileFigures {
  const spans = rowSpans(file.profile);
  const total = spans.reduce((n, s) => n + s.bytes, 0);
  let bytes = 0;
  for (const r of rows) {
    const bounds = {
      lo: r.start === undefined ? null : lastBelow(Buffer.from(r.start, 'hex')),
      hi: r.end === undefined ? null : lastBelow(Buffer.from(r.end, 'hex')),
    };
    for (const s of spans) bytes += bytesWithin(s, bounds);
  }
  const fraction = total > 0 ? Math.min(1, bytes / total) : 0;
  return shareFigures({ size: file.size, entries: file.entries, ...statsFields(file) }, fraction, true);
}

/**
 * A bound of [start, end) as one of (lo, hi]: a row ending in a zero byte is the smallest after the row
 * without it (tabletRows appends one), which stands in for it; any other row is used as it is (the share
 * is an estimate).
 */
function lastBelow(row: Buffer): Buffer {
  return row.length > 0 && row[row.length - 1] === 0 ? row.subarray(0, -1) : row;
}

/** Whether any row of the file is in `rows`. */
function touches(profile: FileProfile, rows: readonly HexRange[]): boolean {
  if (profile.firstRow === null || profile.lastRow === null) return false;
  const span: HexRange = {
    start: profile.firstRow.toString('hex'),
    end: `${profile.lastRow.toString('hex')}00`,
  };
  return rows.some((r) => !isEmptyRange(intersectRows(r, span)));
}

/**
 * What importing `files` under `importId` does to the tablet: `piece` is the rows the client sent it
 * for (cut by the tablets it found; absent: all of the tablet's). The caller checked that the piece is
 * within the tablet's rows.
 */
export function decideImport(
  meta: TabletMeta,
  importId: string,
  piece: HexRange | undefined,
  files: readonly ImportedFile[],
  now: number,
): ImportDecision {
  const tablet = rowsOf(meta);
  const before = meta.ingests.get(importRecordId(importId));
  const asked = piece ? intersectRows(piece, tablet) : tablet;
  // Rows of the piece this tablet (or the tablets it came from) applied already.
  const done = before === undefined ? [tablet] : (before.rows ?? [tablet]);
  const todo = rowsOutside(asked, before === undefined ? [] : done);
  if (todo.length === 0) return { kind: 'duplicate' };
  const oldest = Math.min(...files.map((f) => f.oldestTs));
  const conflicts = files.length > 0 ? importConflicts(meta, oldest) : [];
  if (conflicts.length > 0) return { kind: 'wait', ecids: conflicts };
  const whole = todo.length === 1 && sameRows(todo[0]!, tablet);
  const added = new Map<string, FileMeta>();
  let time = meta.time;
  for (const f of files) {
    if (!touches(f.profile, todo)) continue;
    const share = shareOf(f, todo);
    const had = meta.files.get(f.name);
    if (had && !had.fence) continue; // it reads every row of the file already
    // Another piece of the import applied it here before, in other rows (a merged tablet): the file is
    // read in those and these.
    const fence = joinRows([...(had?.fence ?? []), ...todo]);
    const all = whole || (fence.length === 1 && coversRows(fence[0]!, tablet));
    const { fence: _fence, ...before } = had ?? {};
    const figures = had ? addFigures(share, before as FileFigures) : share;
    added.set(f.name, { ...figures, ...(all ? {} : { fence }) });
    if (f.newestTs <= now + IMPORT_CLOCK_AHEAD_MS) time = Math.max(time, f.newestTs);
  }
  let record: IngestRecord | undefined = before;
  for (const r of todo) record = recordApplied(record, r, tablet, now);
  return { kind: 'apply', files: added, record: record!, before, time };
}

/** The record's value, for the mutation's condition (undefined: the column must be absent). */
export const recordValue = (r: IngestRecord | undefined): string | undefined =>
  r === undefined ? undefined : ingestRecordValue(r);
