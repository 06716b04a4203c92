/**
 * A tablet's applied ingest request ids (DESIGN.md, "Metadata store"): the row `~ingest:<tablet row>`
 * holds, per column `<id>`, when an ingest request with that id was applied (a retried request is not
 * applied twice), for {@link INGEST_DEDUPE_MS}. Not in the tablet's row: a busy tablet remembers thousands
 * of them, and everything that reads tablets (the manager's assignment pass, the collector, admin views)
 * would parse them every time. The tablet server reads both rows when it loads a tablet and sees the ids
 * as `ingest:<id>` columns of the tablet (TabletMeta.ingests).
 *
 * A value is either
 *   <at>                                  every entry of the batch in this tablet's rows was applied
 *                                         (ms since the epoch), or
 *   {"at":<at>,"rows":[HexRange, …]}      the batch's entries in these rows were applied (rows.ts).
 * A client whose batch meets a tablet that split or merged cuts it by the tablets it finds now and sends
 * each piece under the batch's name with the rows it was cut to; a piece holds every entry of the batch
 * in its rows. So a tablet that applied some rows of a batch — or whose parent did, before a split, or
 * one of the tablets merged into it — skips the entries in those rows and applies the rest once
 * ({@link rowApplied}). A split copies the records to every daughter; a merge joins them.
 */
import { z } from 'zod';
import { ALL_ROWS, coversRows, hexRangeSchema, intersectRows, rowInRows, type HexRange } from './rows.js';

/** The column prefix under which a tablet server sees a tablet's ids (TabletMeta.ingests). */
export const INGEST_PREFIX = 'ingest:';

/**
 * How long a tablet remembers an ingest request id. Clients retry a request only within this window
 * (their deadline is far shorter), so a retry is always recognised.
 */
export const INGEST_DEDUPE_MS = 15 * 60_000;

/**
 * A bulk import (`excompact import`) is recorded under `import.<id>`, and remembered for a week: the same
 * files imported again under their id, however much later, are not applied twice.
 */
export const IMPORT_PREFIX = 'import.';
export const IMPORT_DEDUPE_MS = 7 * 86_400_000;

/** What a tablet remembers of a batch it applied: when, and which rows of it (absent: all of them). */
export interface IngestRecord {
  at: number;
  rows?: HexRange[];
}

const recordSchema = z.object({ at: z.number(), rows: z.array(hexRangeSchema).min(1).optional() });

/** Reads a record's value; an unreadable one counts as the whole batch (never applied twice). */
export function parseIngestRecord(value: string): IngestRecord {
  if (/^\d+$/.test(value)) return { at: Number(value) };
  try {
    const parsed = recordSchema.safeParse(JSON.parse(value));
    if (parsed.success) return parsed.data.rows ? parsed.data : { at: parsed.data.at };
  } catch {
    // below
  }
  return { at: 0 };
}

export function ingestRecordValue(record: IngestRecord): string {
  return record.rows === undefined ? String(record.at) : JSON.stringify(record);
}

/** Whether an entry of the batch in `row` was applied already, by what `record` says. */
export function rowApplied(record: IngestRecord | undefined, row: Uint8Array): boolean {
  if (!record) return false;
  return record.rows === undefined || record.rows.some((r) => rowInRows(row, r));
}

/**
 * The record after the tablet applied the entries of `piece` (undefined: the whole batch) that it had
 * not applied yet. It records the piece's rows within the tablet's — every entry of the batch there is
 * now applied — beside the rows recorded before. A piece of every row of the tablet, applied at once,
 * records just the time: "every entry of the batch in this tablet's rows" (a split's daughters inherit
 * it as it is; a merge turns it into the rows of the tablet it came from).
 */
export function recordApplied(
  record: IngestRecord | undefined,
  piece: HexRange | undefined,
  tablet: HexRange,
  at: number,
): IngestRecord {
  if (!record && (!piece || coversRows(piece, tablet))) return { at };
  const rows = intersectRows(piece ?? ALL_ROWS, tablet);
  return { at: record?.at ?? at, rows: [...(record?.rows ?? []), rows] };
}

/**
 * The ids of `ingests` (oldest first, as TabletMeta.ingests keeps them) remembered for longer than
 * INGEST_DEDUPE_MS at `now` (IMPORT_DEDUPE_MS for an import): only the expired ones and the imports are
 * visited, however many batches a busy tablet remembers. An id out of order (a clock stepping back) is
 * only forgotten later than it could be, never sooner.
 */
export function expiredIngests(ingests: ReadonlyMap<string, IngestRecord>, now: number): string[] {
  const out: string[] = [];
  for (const [id, record] of ingests) {
    const age = now - record.at;
    if (id.startsWith(IMPORT_PREFIX)) {
      if (age > IMPORT_DEDUPE_MS) out.push(id);
      continue;
    }
    if (age <= INGEST_DEDUPE_MS) break;
    out.push(id);
  }
  return out;
}

/** The row of a tablet's applied ingest request ids (columns: the ids; values: records). */
export const INGEST_ROW_PREFIX = '~ingest:';
export const ingestRow = (tabletRow: string): string => `${INGEST_ROW_PREFIX}${tabletRow}`;

/** A tablet's row with its ingest ids as the tablet server sees it: `ingest:<id>` columns added. */
export function withIngests(cols: Map<string, string>, ingests: Map<string, string>): Map<string, string> {
  const out = new Map(cols);
  for (const [id, value] of ingests) out.set(`${INGEST_PREFIX}${id}`, value);
  return out;
}
