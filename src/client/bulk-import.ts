/**
 * Bulk import from the client's side: files already verified and uploaded under the table's prefix
 * (cli/import-run.ts) sent to every tablet whose rows they hold, each request carrying the tablet's rows
 * as the client knows them. A tablet that split meanwhile refuses (TABLET_CHANGED): the table's tablets
 * are looked up again and the request cut by them, each piece under the import's id, which the tablets
 * record with the rows applied (meta/ingest-ids.ts). So every row of every file is imported once,
 * however the tablets change and however often this is run again with the same id.
 */
import { ExcError } from '../errors.js';
import { intersectRows, isEmptyRange, type HexRange } from '../meta/rows.js';
import { backoffDelay, sleep } from '../retry.js';
import type { ExcClient } from './client.js';
import { rowsOfView } from './routing.js';

/** A file to import: its object name and what a full read of it found. */
export interface ImportFile {
  name: string;
  firstRow: Buffer;
  lastRow: Buffer;
  entries: number;
  /** Delete markers among them. */
  deletes: number;
  oldestTs: number;
  newestTs: number;
  /** Bytes of keys and values, entries per family (hex) and of the others, as the read found them. */
  keyBytes?: number;
  valueBytes?: number;
  families?: [string, number][];
  otherFamilies?: number;
}

export interface ImportOutcome {
  /** Tablets that added files this time. */
  tablets: number;
  /** Tablet requests answered as already applied (an earlier run of the same import). */
  repeated: number;
  /** Files added, counted per tablet. */
  added: number;
}

export interface ImportOptions {
  /** How long a tablet may keep the import waiting for its compactions that drop deletes (default 10 min). */
  waitMs?: number;
  /** Requests in flight at once (default 8). */
  parallel?: number;
}

/** How often a request follows tablets that split before it gives up. */
const MAX_RECUTS = 50;

const spanOf = (f: ImportFile): HexRange => ({
  start: f.firstRow.toString('hex'),
  end: `${f.lastRow.toString('hex')}00`,
});

export async function importFiles(
  client: ExcClient,
  table: string,
  importId: string,
  files: readonly ImportFile[],
  options: ImportOptions = {},
): Promise<ImportOutcome> {
  const outcome: ImportOutcome = { tablets: 0, repeated: 0, added: 0 };
  const spans = files.map((f) => ({ file: f, span: spanOf(f) }));
  const within = (rows: HexRange) => spans.filter((s) => !isEmptyRange(intersectRows(s.span, rows)));

  const send = async (tablet: string, rows: HexRange, depth: number): Promise<void> => {
    const mine = within(rows).map((s) => s.file);
    if (mine.length === 0) return;
    const body = {
      tablet,
      importId,
      rows,
      files: mine.map((f) => ({
        name: f.name,
        entries: f.entries,
        deletes: f.deletes,
        oldestTs: f.oldestTs,
        newestTs: f.newestTs,
        ...(f.keyBytes === undefined ? {} : { keyBytes: f.keyBytes, valueBytes: f.valueBytes }),
        ...(f.families === undefined ? {} : { families: f.families, otherFamilies: f.otherFamilies }),
      })),
    };
    try {
      const answer = await waiting(options.waitMs ?? 600_000, () =>
        client.postToTablet<{ added: string[]; duplicate?: boolean }>(table, tablet, '/v1/import', body),
      );
      if (answer.duplicate) outcome.repeated++;
      else {
        outcome.tablets++;
        outcome.added += answer.added.length;
      }
      return;
    } catch (err) {
      if (!(err instanceof ExcError && err.code === 'TABLET_CHANGED') || depth >= MAX_RECUTS) throw err;
    }
    for (const t of await client.tablets(table)) {
      const theirs = intersectRows(rows, rowsOfView(t));
      if (!isEmptyRange(theirs)) await send(t.tablet, theirs, depth + 1);
    }
  };

  const pieces = (await client.tablets(table)).map((t) => ({ tablet: t.tablet, rows: rowsOfView(t) }));
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < pieces.length) {
      const p = pieces[next++]!;
      await send(p.tablet, p.rows, 0);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.parallel ?? 8, pieces.length) }, worker));
  return outcome;
}

/** Calls `call` again while the tablet answers IMPORT_WAITING, for up to `waitMs`. */
async function waiting<T>(waitMs: number, call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof ExcError && err.code === 'IMPORT_WAITING') || Date.now() > deadline) throw err;
    }
    await sleep(backoffDelay(attempt, { maxMs: 1_000 }));
  }
}
