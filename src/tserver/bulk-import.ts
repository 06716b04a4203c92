/**
 * Bulk import on the tablet server (`POST /v1/import`): files a client verified and uploaded under the
 * table's prefix (tables/<tableId>/B<ulid>.rf) added to one tablet in one conditional mutation, recorded
 * under the import's id so that a repeat is applied once. The decision is import-rules.ts; here, the I/O
 * around it: the names checked, each file's index read (its footer and index must be whole), its age
 * checked against the collector's grace period (an upload that old may be collected before it is
 * referenced), and the change made in the tablet's mutex.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { fileStatsFields } from '../meta/file-stats.js';
import { expiredIngests, ingestRow } from '../meta/ingest-ids.js';
import { isImportFileOf } from '../meta/paths.js';
import { coversRows, describeRows, hexRangeSchema } from '../meta/rows.js';
import { COL_TIME, fileCol, rowsOf } from '../meta/tablet.js';
import { fileProfile, type ObjectStore } from '../storage/index.js';
import { parseInput } from '../validate.js';
import { tabletChanged } from './data.js';
import type { Hosting } from './hosting.js';
import { decideImport, importRecordId, recordValue, type ImportedFile } from './import-rules.js';

const timestamp = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const importSchema = z.object({
  tablet: z.string().min(1).max(200),
  /** The import's id: the same files sent again under it are applied once (for IMPORT_DEDUPE_MS). */
  importId: z.string().regex(/^[0-9A-Za-z_-]{1,64}$/, 'expected 1-64 letters, digits, _ or -'),
  /**
   * The rows this request is for: the tablet's as the client knows them. A tablet that no longer holds
   * them all (it split) refuses with TABLET_CHANGED; one that holds more (it merged) applies these only.
   */
  rows: hexRangeSchema,
  files: z
    .array(
      z.object({
        name: z.string().min(1).max(1024),
        /** What the client's full read of the file found (storage/rfile/verify.ts). */
        entries: z.number().int().positive(),
        /** Deletes, key and value bytes, families (meta/file-stats.ts; absent: the file records none). */
        ...fileStatsFields,
        oldestTs: timestamp,
        newestTs: timestamp,
      }),
    )
    .min(1)
    .max(1_000),
});

/** How long an import waiting for compactions that drop deletes keeps new ones from being reserved. */
const HOLD_MS = 30_000;

export interface ImportResult {
  /** The files added to the tablet (none when it had applied the import before, or none of its rows). */
  added: string[];
  duplicate?: true;
}

export class BulkImports {
  constructor(
    private readonly hosting: Hosting,
    private readonly store: ObjectStore,
    /** A file uploaded longer ago is refused: the collector may delete it before it is referenced. */
    private readonly maxAgeMs: number,
  ) {}

  async import(body: unknown): Promise<ImportResult> {
    const req = parseInput(importSchema, body, 'body');
    const tablet = await this.hosting.get(req.tablet);
    const { tableId } = tablet.meta;
    const files: ImportedFile[] = [];
    const uploaded = new Map<string, number>();
    for (const [i, f] of req.files.entries()) {
      if (!isImportFileOf(tableId, f.name)) {
        throw new ExcError(
          'BAD_REQUEST',
          `files.${i}.name: ${JSON.stringify(f.name)} is not an import file of table ${tableId} (tables/${tableId}/B<ulid>.rf)`,
          { details: { field: `files.${i}.name` } },
        );
      }
      if (f.oldestTs > f.newestTs)
        throw new ExcError('BAD_REQUEST', `files.${i}: oldestTs is after newestTs`, {
          details: { field: `files.${i}` },
        });
      const { file, modifiedMs } = await this.read(f);
      files.push(file);
      uploaded.set(file.name, modifiedMs);
    }
    return tablet.mutex.run(async () => {
      if (tablet.stale) await this.hosting.resync(tablet);
      if (!coversRows(rowsOf(tablet.meta), req.rows))
        throw tabletChanged(tablet.meta, `the rows ${describeRows(req.rows)} of the import`);
      const now = Date.now();
      // Again, right before the change: the mutex may have kept this request waiting.
      for (const [name, modifiedMs] of uploaded) this.checkAge(name, modifiedMs, now);
      const decision = decideImport(tablet.meta, req.importId, req.rows, files, now);
      if (decision.kind === 'duplicate') return { added: [], duplicate: true as const };
      if (decision.kind === 'wait') {
        tablet.holdDeletes(HOLD_MS, now);
        throw new ExcError(
          'IMPORT_WAITING',
          `import ${req.importId} waits for ${decision.ecids.length} compaction(s) of ${tablet.row} that drop delete markers (${decision.ecids.join(', ')}); send it again`,
          { details: { tablet: tablet.row, reservations: decision.ecids } },
        );
      }
      const id = importRecordId(req.importId);
      const ids = ingestRow(tablet.row);
      const expired = expiredIngests(tablet.meta.ingests, now).filter((e) => e !== id);
      const before = recordValue(decision.before);
      const applied = await this.hosting.change(tablet, {
        conditions: [
          before === undefined
            ? { op: 'absent', row: ids, col: id }
            : { op: 'equals', row: ids, col: id, value: before },
        ],
        puts: [
          ...[...decision.files].map(([name, f]) => ({
            row: tablet.row,
            col: fileCol(name),
            value: JSON.stringify(f),
          })),
          ...(decision.time > tablet.meta.time
            ? [{ row: tablet.row, col: COL_TIME, value: String(decision.time) }]
            : []),
          { row: ids, col: id, value: recordValue(decision.record)! },
        ],
        deletes: expired.map((e) => ({ row: ids, col: e })),
        apply: (meta) => {
          for (const [name, f] of decision.files) meta.files.set(name, f);
          meta.time = Math.max(meta.time, decision.time);
          meta.ingests.delete(id);
          meta.ingests.set(id, decision.record);
          for (const e of expired) meta.ingests.delete(e);
        },
        replan: true,
      });
      if (!applied) {
        throw new ExcError('OUTCOME_UNKNOWN', `import ${req.importId} of ${tablet.row}: send it again`, {
          details: { tablet: tablet.row },
        });
      }
      return { added: [...decision.files.keys()] };
    });
  }

  /** A file's index and size, read from the store: whole, and young enough not to be collected. */
  private async read(
    f: z.output<typeof importSchema>['files'][number],
  ): Promise<{ file: ImportedFile; modifiedMs: number }> {
    const info = await this.store.stat(f.name);
    if (!info)
      throw new ExcError('OBJECT_NOT_FOUND', `no file ${f.name}: upload it first`, {
        details: { file: f.name },
      });
    this.checkAge(f.name, info.modifiedMs, Date.now());
    const profile = await fileProfile(this.store, f.name);
    const { name, ...figures } = f;
    if (f.deletes !== undefined && f.deletes > f.entries)
      throw new ExcError('BAD_REQUEST', `${name}: more deletes (${f.deletes}) than entries (${f.entries})`, {
        details: { file: name },
      });
    return {
      file: { name, ...figures, size: info.size, profile },
      modifiedMs: info.modifiedMs,
    };
  }

  /**
   * A file uploaded longer ago than half the collector's grace period is refused: once one tablet
   * compacted it away, its deletion mark ages towards the grace period, after which the collector may
   * delete it whoever references it next.
   */
  private checkAge(name: string, modifiedMs: number, now: number): void {
    const age = now - modifiedMs;
    if (age <= this.maxAgeMs) return;
    throw new ExcError(
      'BAD_REQUEST',
      `${name} was uploaded ${Math.round(age / 1000)} s ago, more than half the collector's grace period: it may be collected before it is referenced; run the import again (it uploads the files anew)`,
      { details: { file: name } },
    );
  }
}
