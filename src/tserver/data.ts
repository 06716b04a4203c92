/**
 * Ingest and scan of a hosted tablet.
 *
 * Entries travel in the wire format of ../rpc/entries.ts.
 *
 * Ingest: a batch is validated whole (encodings, sizes, every row inside the tablet) and rejected whole
 * with the first problem named; it is sorted (in batch order where its entries share the batch's stamp:
 * ingest-batch.ts), written as one new sorted file, and the file is added to the tablet with a conditional
 * mutation that also updates its queue entries.
 *
 * Scan: a row range of the tablet through the merge and iterator stack with the table's settings
 * (deletes applied and hidden, versions, age-off). Pages end at row boundaries, so versioning is never
 * cut in the middle of a cell; `nextRow` resumes after the last row returned.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { newFileName } from '../meta/paths.js';
import { expiredIngests, ingestRow } from '../meta/ingest-ids.js';
import { COL_TIME, fileCol, tabletTime, type TabletMeta } from '../meta/tablet.js';
import {
  intersectRanges,
  rowInRange,
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
});

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

/** Whether the tablet applied a batch of this name (a repeat: its first answer was lost). */
function appliedBefore(tablet: HostedTablet, requestId: string | undefined): boolean {
  return requestId !== undefined && tablet.meta.ingests.has(requestId);
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
    if (appliedBefore(tablet, req.requestId))
      return { file: null, entries: req.entries.length, duplicate: true };
    // In flight from its stamp until applied or failed: a full compaction reserved meanwhile may have to
    // keep its delete markers (HostedTablet.mayDropDeletes).
    const { ts, settle } = tablet.startIngest();
    try {
      return await this.ingestStamped(tablet, req, ts);
    } finally {
      settle();
    }
  }

  private async ingestStamped(
    tablet: HostedTablet,
    req: z.output<typeof ingestSchema>,
    ts: number,
  ): Promise<IngestResult> {
    const { requestId } = req;
    const seen = (): boolean => appliedBefore(tablet, requestId);
    const rows = tabletRange(tablet.meta);
    const batch: BatchEntry[] = req.entries.map((w, i) => {
      const row = Buffer.from(w.row, 'base64');
      if (!rowInRange(row, rows)) {
        throw new ExcError(
          'BAD_REQUEST',
          `entries.${i}: row ${describeRow(row)} is outside tablet ${tablet.row}`,
          {
            details: { field: `body.entries.${i}.row`, tablet: tablet.row },
          },
        );
      }
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
    const file = { size: summary.size, entries: summary.entries };
    const applied = await tablet.mutex.run(async () => {
      // Decided on the tablet as the store has it (a change whose answer was lost may have moved its time).
      if (tablet.stale) await this.hosting.resync(tablet);
      // Checked again in the mutex: a repeated request may have been applied while this one wrote its file.
      if (seen()) return false;
      const now = Date.now();
      const expired = expiredIngests(tablet.meta.ingests, now);
      const ids = ingestRow(tablet.row);
      return this.hosting.change(tablet, {
        conditions: requestId ? [{ op: 'absent', row: ids, col: requestId }] : [],
        puts: [
          { row: tablet.row, col: fileCol(name), value: JSON.stringify(file) },
          ...(ts > tablet.meta.time ? [{ row: tablet.row, col: COL_TIME, value: String(ts) }] : []),
          ...(requestId ? [{ row: ids, col: requestId, value: String(now) }] : []),
        ],
        deletes: expired.map((id) => ({ row: ids, col: id })),
        apply: (meta) => {
          meta.files.set(name, file);
          meta.time = Math.max(meta.time, ts);
          if (requestId) meta.ingests.set(requestId, now);
          for (const id of expired) meta.ingests.delete(id);
        },
        replan: true,
      });
    });
    if (!applied) {
      // Applied by an earlier attempt: this attempt's file is referenced by nothing (the collector's
      // sweep would find it too, after its grace period).
      await this.store.delete(name).catch(() => undefined);
      return { file: null, entries: req.entries.length, duplicate: true };
    }
    this.stats.ingestedBatches++;
    this.stats.ingestedEntries += sorted.length;
    return { file: name, entries: sorted.length };
  }

  async scan(body: unknown): Promise<{ entries: WireEntry[]; nextRow: string | null }> {
    const req = parseInput(scanSchema, body, 'body');
    // A server cut off from ZooKeeper may already have lost its tablets to another server, which may
    // have taken writes since: do not answer reads from what may be an old copy.
    this.assertServing();
    const tablet = await this.hosting.get(req.tablet);
    const settings = await this.configs.get(tablet.meta.tableId);
    const filters = req.filters === undefined ? [] : validateFilters(req.filters);
    const range = this.rangeOf(tablet, req);
    const files = [...tablet.meta.files.keys()];
    this.stats.scans++;
    const out: WireEntry[] = [];
    let lastRow: Buffer | undefined;
    let cut = false;
    for await (const e of scanFiles({
      store: this.store,
      files,
      range,
      settings: iteratorSettings(settings.config, filters, true, tabletTime(tablet.meta)),
    })) {
      if (out.length >= req.limit && lastRow && !e.key.row.equals(lastRow)) {
        cut = true;
        break;
      }
      out.push(toWire(e));
      lastRow = e.key.row;
    }
    return { entries: out, nextRow: cut && lastRow ? lastRow.toString('base64') : null };
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
