/**
 * Ingest and scan of a hosted tablet.
 *
 * Entries travel in the wire format of ../rpc/entries.ts.
 *
 * Ingest: a batch is validated whole (encodings, sizes) and rejected whole with the first problem named;
 * a row outside the tablet's rows (it split or merged since the client looked) refuses it whole with
 * TABLET_CHANGED, and the client sends each row where it is now. The entries of the batch this tablet
 * applied before (a repeat, or a piece of it applied here or by the tablet it came from: ingest-ids.ts)
 * are skipped; the rest is sorted (in batch order where its entries share the batch's stamp:
 * ingest-batch.ts), written as one new sorted file, and the file is added to the tablet with a conditional
 * mutation that also records the batch and updates its queue entries.
 *
 * Scan: a row range of the tablet through the merge and iterator stack with the table's settings
 * (deletes applied and hidden, versions, age-off), clipped to the tablet's rows (a file it shares with
 * its sibling holds theirs too). Pages end at row boundaries, so versioning is never cut in the middle of
 * a cell; `nextRow` resumes after the last row returned. A scan that starts before the tablet's first
 * row is refused (TABLET_CHANGED: the tablet split, and rows the client expected here are in another),
 * and the answer says where the tablet ends, so the client goes on from there.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { statsFields } from '../meta/file-stats.js';
import { newFileName } from '../meta/paths.js';
import {
  expiredIngests,
  ingestRecordValue,
  ingestRow,
  recordApplied,
  rowApplied,
  type IngestRecord,
} from '../meta/ingest-ids.js';
import { hexRangeSchema, rowInRows } from '../meta/rows.js';
import { COL_TIME, fileCol, rowsOf, tabletTime, type TabletMeta } from '../meta/tablet.js';
import {
  intersectRanges,
  scanFiles,
  validateFilters,
  writeRFile,
  type Entry,
  type ObjectStore,
  type RowRange,
} from '../storage/index.js';
import { parseInput } from '../validate.js';
import { MAX_BATCH_ENTRIES, toWire, wireEntrySchema, type WireEntry } from '../rpc/entries.js';
import type { HostedTablet } from './hosted-tablet.js';
import { batchFile, type BatchEntry } from './ingest-batch.js';
import type { Hosting } from './hosting.js';
import { iteratorSettings, type TableConfigs } from './table-configs.js';

export const ingestSchema = z.object({
  tablet: z.string().min(1),
  /**
   * The client's name for this batch: a request repeated with the same id (its first answer was lost) is
   * applied once. Remembered by the tablet for INGEST_DEDUPE_MS.
   */
  requestId: z
    .string()
    .regex(/^[0-9A-Za-z._-]{1,100}$/, 'expected 1-100 letters, digits, . _ -')
    .optional(),
  /**
   * A piece of the batch `requestId`, cut to these rows by a client whose batch met a tablet that split or
   * merged: it holds every entry of the batch in them. Absent: the whole batch.
   */
  rows: hexRangeSchema.optional(),
  entries: z.array(wireEntrySchema).min(1, 'a batch needs at least one entry').max(MAX_BATCH_ENTRIES),
});

const optionalRow = z.base64().optional();
export const scanSchema = z.object({
  tablet: z.string().min(1),
  startRow: optionalRow,
  startInclusive: z.boolean().default(true),
  endRow: optionalRow,
  endInclusive: z.boolean().default(false),
  /** Resume strictly after this row (from a previous page). */
  afterRow: optionalRow,
  limit: z.number().int().min(1).max(100_000).default(1_000),
  /** Scan-time filters (built-in ones, by name). */
  filters: z.unknown().optional(),
  /**
   * The tablet's previous end row as the client knows it (hex; null: the table's first tablet). When the
   * tablet's is another (it split or merged), the scan is refused with TABLET_CHANGED: rows the client
   * expects here are in another tablet now.
   */
  prevEndRowHex: z
    .string()
    .regex(/^(?:[0-9a-f]{2})*$/)
    .nullable()
    .optional(),
});

type ParsedWireEntry = z.output<typeof wireEntrySchema>;

/** The rows a tablet holds: (prevEndRow, endRow]. */
function tabletRange(meta: TabletMeta): RowRange {
  return {
    ...(meta.prevEndRow === null ? {} : { startRow: meta.prevEndRow, startInclusive: false }),
    ...(meta.endRow === null ? {} : { endRow: meta.endRow, endInclusive: true }),
  };
}

function describeRow(row: Buffer): string {
  return /^[\x20-\x7e]*$/.test(row.toString('latin1'))
    ? JSON.stringify(row.toString('latin1'))
    : `0x${row.toString('hex')}`;
}

/** What the tablet remembers of the batch `requestId` (a repeat, or a piece of a batch cut by a split). */
function recordOf(tablet: HostedTablet, requestId: string | undefined): IngestRecord | undefined {
  return requestId === undefined ? undefined : tablet.meta.ingests.get(requestId);
}

/** TABLET_CHANGED: `row` of a request is not one of the tablet's rows (any more). */
export function tabletChanged(meta: TabletMeta, what: string, row?: Buffer): ExcError {
  const rows = (r: Buffer | null, none: string) => (r === null ? none : describeRow(r));
  return new ExcError(
    'TABLET_CHANGED',
    `${what}${row ? ` ${describeRow(row)}` : ''} is not in tablet ${meta.row}, which holds the rows (${rows(meta.prevEndRow, '-∞')}, ${rows(meta.endRow, '+∞')}]: it split or merged; look its tablets up again`,
    {
      details: {
        tablet: meta.row,
        prevEndRowHex: meta.prevEndRow?.toString('hex') ?? null,
        endRowHex: meta.endRow?.toString('hex') ?? null,
      },
    },
  );
}

interface IngestResult {
  file: string | null;
  entries: number;
  duplicate?: true;
}

export class DataPath {
  /** Counters for /status. */
  readonly stats = { ingestedBatches: 0, ingestedEntries: 0, scans: 0 };

  constructor(
    private readonly hosting: Hosting,
    private readonly store: ObjectStore,
    private readonly configs: TableConfigs,
    /** Throws when this server may not serve reads now (its ZooKeeper session is in doubt). */
    private readonly assertServing: () => void = () => undefined,
  ) {}

  async ingest(body: unknown): Promise<IngestResult> {
    const req = parseInput(ingestSchema, body, 'body');
    const tablet = await this.hosting.get(req.tablet);
    const entries = this.unapplied(tablet, req);
    if (entries.length === 0) return { file: null, entries: req.entries.length, duplicate: true };
    // In flight from its stamp until applied or failed: a full compaction reserved meanwhile may have to
    // keep its delete markers (HostedTablet.mayDropDeletes).
    const { ts, settle } = tablet.startIngest();
    try {
      return await this.ingestStamped(tablet, req, entries, ts);
    } finally {
      settle();
    }
  }

  /**
   * The batch's entries this tablet has not applied yet, in batch order (all of them but for a repeat);
   * TABLET_CHANGED when one is outside its rows.
   */
  private unapplied(
    tablet: HostedTablet,
    req: z.output<typeof ingestSchema>,
  ): { wire: ParsedWireEntry; index: number; row: Buffer }[] {
    const rows = rowsOf(tablet.meta);
    const record = recordOf(tablet, req.requestId);
    const out: { wire: ParsedWireEntry; index: number; row: Buffer }[] = [];
    req.entries.forEach((wire, index) => {
      const row = Buffer.from(wire.row, 'base64');
      if (!rowInRows(row, rows)) throw tabletChanged(tablet.meta, `entries.${index}: row`, row);
      if (!rowApplied(record, row)) out.push({ wire, index, row });
    });
    return out;
  }

  private async ingestStamped(
    tablet: HostedTablet,
    req: z.output<typeof ingestSchema>,
    entries: { wire: ParsedWireEntry; row: Buffer }[],
    ts: number,
  ): Promise<IngestResult> {
    const { requestId } = req;
    const before = recordOf(tablet, requestId);
    const batch: BatchEntry[] = entries.map(({ wire: w, row }) => {
      const entry: Entry = {
        key: {
          row,
          family: Buffer.from(w.cf, 'base64'),
          qualifier: Buffer.from(w.cq, 'base64'),
          timestamp: w.ts ?? ts,
          deleted: w.delete,
        },
        value: w.delete ? Buffer.alloc(0) : Buffer.from(w.value, 'base64'),
      };
      return { entry, stamped: w.ts === undefined };
    });
    // Sorted, in batch order where every entry has the same stamp (ingest-batch.ts).
    const sorted = batchFile(batch);

    const name = newFileName(tablet.meta.tableId, 'ingest');
    // The table's codec; when its settings cannot be read at all, the default: never a reason to refuse data.
    const settings = await this.configs.get(tablet.meta.tableId).catch(() => undefined);
    const summary = await writeRFile(this.store, name, sorted, {
      compression: settings?.config.compression,
      blockSize: settings?.config.blockSize,
    });
    const file = { size: summary.size, entries: summary.entries, ...statsFields(summary.stats) };
    let refused: ExcError | undefined;
    const applied = await tablet.mutex.run(async () => {
      // Decided on the tablet as the store has it (a change whose answer was lost may have moved its time).
      if (tablet.stale) await this.hosting.resync(tablet);
      // Checked again in the mutex: the tablet may have split or merged while this batch wrote its file,
      // and a repeated request may have been applied meanwhile (then this file may hold its entries).
      const rows = rowsOf(tablet.meta);
      const outside = entries.find((e) => !rowInRows(e.row, rows));
      if (outside) {
        refused = tabletChanged(tablet.meta, 'row', outside.row);
        return false;
      }
      const record = recordOf(tablet, requestId);
      const same = (a?: IngestRecord, b?: IngestRecord) =>
        (a && ingestRecordValue(a)) === (b && ingestRecordValue(b));
      if (!same(record, before)) {
        if (entries.every((e) => rowApplied(record, e.row))) return false;
        refused = new ExcError(
          'OUTCOME_UNKNOWN',
          `batch ${requestId} of ${tablet.row} was partly applied by another request meanwhile; send it again`,
          { details: { tablet: tablet.row } },
        );
        return false;
      }
      const now = Date.now();
      const expired = expiredIngests(tablet.meta.ingests, now);
      const ids = ingestRow(tablet.row);
      const after = requestId ? recordApplied(record, req.rows, rows, now) : undefined;
      return this.hosting.change(tablet, {
        conditions: requestId
          ? [
              record === undefined
                ? { op: 'absent', row: ids, col: requestId }
                : { op: 'equals', row: ids, col: requestId, value: ingestRecordValue(record) },
            ]
          : [],
        puts: [
          { row: tablet.row, col: fileCol(name), value: JSON.stringify(file) },
          ...(ts > tablet.meta.time ? [{ row: tablet.row, col: COL_TIME, value: String(ts) }] : []),
          ...(requestId && after ? [{ row: ids, col: requestId, value: ingestRecordValue(after) }] : []),
        ],
        deletes: expired.map((id) => ({ row: ids, col: id })),
        apply: (meta) => {
          meta.files.set(name, file);
          meta.time = Math.max(meta.time, ts);
          if (requestId && after) {
            // Kept in time order: a record already there keeps its place.
            meta.ingests.set(requestId, after);
          }
          for (const id of expired) meta.ingests.delete(id);
        },
        replan: true,
      });
    });
    if (!applied) {
      // Not applied (refused, or an earlier attempt applied it): this attempt's file is referenced by
      // nothing (the collector's sweep would find it too, after its grace period).
      await this.store.delete(name).catch(() => undefined);
      if (refused) throw refused;
      return { file: null, entries: req.entries.length, duplicate: true };
    }
    this.stats.ingestedBatches++;
    this.stats.ingestedEntries += sorted.length;
    return { file: name, entries: sorted.length };
  }

  async scan(
    body: unknown,
  ): Promise<{ entries: WireEntry[]; nextRow: string | null; endRowHex: string | null }> {
    const req = parseInput(scanSchema, body, 'body');
    // A server cut off from ZooKeeper may already have lost its tablets to another server, which may
    // have taken writes since: do not answer reads from what may be an old copy.
    this.assertServing();
    const tablet = await this.hosting.get(req.tablet);
    const prev = tablet.meta.prevEndRow?.toString('hex') ?? null;
    if (req.prevEndRowHex !== undefined && req.prevEndRowHex !== prev)
      throw tabletChanged(tablet.meta, 'the scan starts at a row that');
    const settings = await this.configs.get(tablet.meta.tableId);
    const filters = req.filters === undefined ? [] : validateFilters(req.filters);
    const range = this.rangeOf(tablet, req);
    const files = [...tablet.meta.files.keys()];
    const fences = [...tablet.meta.files.values()].map((f) => f.fence ?? null);
    this.stats.scans++;
    const out: WireEntry[] = [];
    let lastRow: Buffer | undefined;
    let cut = false;
    for await (const e of scanFiles({
      store: this.store,
      files,
      range,
      ...(fences.some((f) => f !== null) ? { fences } : {}),
      settings: iteratorSettings(settings.config, filters, true, tabletTime(tablet.meta)),
    })) {
      if (out.length >= req.limit && lastRow && !e.key.row.equals(lastRow)) {
        cut = true;
        break;
      }
      out.push(toWire(e));
      lastRow = e.key.row;
    }
    return {
      entries: out,
      nextRow: cut && lastRow ? lastRow.toString('base64') : null,
      endRowHex: tablet.meta.endRow?.toString('hex') ?? null,
    };
  }

  /** The requested range, after `afterRow` when resuming, clipped to the tablet's rows. */
  private rangeOf(tablet: HostedTablet, req: z.output<typeof scanSchema>): RowRange {
    const row = (base64: string | undefined) =>
      base64 === undefined ? undefined : Buffer.from(base64, 'base64');
    const asked: RowRange = {
      startRow: row(req.startRow),
      startInclusive: req.startInclusive,
      endRow: row(req.endRow),
      endInclusive: req.endInclusive,
    };
    const after: RowRange = { startRow: row(req.afterRow), startInclusive: false };
    return intersectRanges(intersectRanges(tabletRange(tablet.meta), asked), after);
  }
}
