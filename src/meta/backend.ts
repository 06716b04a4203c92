/**
 * The metadata store as the manager sees it: one sorted key space of cells (row, column → value), read
 * by key and in key order, changed only by batches of conditional mutations, and fenced by the manager
 * epoch (DESIGN.md, "Metadata store"). Two implementations, one contract (test/meta/backend.test.ts):
 *
 * - SQLite (sqlite-backend.ts over store.ts): the embedded default, one file under the data directory;
 * - PostgreSQL (postgres.ts), chosen with `EXC_META=postgres://…`: a database the standby manager reaches
 *   without a shared volume, written to run unchanged on CockroachDB and YugabyteDB.
 *
 * The semantics every implementation keeps:
 * - A batch is applied in order in one transaction. Each mutation's conditions are checked against the
 *   state left by the mutations before it in the batch; a mutation applies whole, or not at all with the
 *   index of its first failing condition and the value found.
 * - Within a mutation: its deletes, then its whole-row deletes, then its puts.
 * - Every write transaction checks that the store's epoch is still the one this handle took over with
 *   (NOT_MANAGER otherwise): a manager that lost the store can no longer change anything.
 * - Scans return cells in (row, col) byte order (rows and columns are printable ASCII), at most `limit`
 *   per page, with a `next` cursor when more may follow.
 * - A snapshot is one consistent read: nothing committed while it runs shows in it.
 */
import { EPOCH_COL, INSTANCE_ROW, parseEpoch } from './keys.js';
import type { Cell, Mutation, MutationResult, Row, ScanPage, ScanRequest } from './types.js';

/** What a read sees: the store, or one snapshot of it. */
export interface MetaReader {
  get(row: string, col: string): Promise<string | undefined>;
  /** The cells of one row, in column order. */
  row(row: string): Promise<Map<string, string>>;
  /** Cells in key order, at most `limit` (default 1,000); `next` resumes the scan. */
  scan(request: ScanRequest): Promise<ScanPage>;
}

export interface MetaBackend extends MetaReader {
  /** Which implementation, and where, for logs (no credentials). */
  readonly describe: string;
  /** Increments the store's epoch and fences every older holder; returns the new epoch. */
  takeOver(): Promise<number>;
  /** The epoch this handle took over with (undefined: not a manager's handle, never fenced). */
  readonly managerEpoch: number | undefined;
  /** The epoch of the manager holding the store now (0 before any takeover). */
  storedEpoch(): Promise<number>;
  /** Runs `read` on one consistent snapshot. */
  snapshot<T>(read: (reader: MetaReader) => Promise<T>): Promise<T>;
  /** Number of cells in rows [start, end). */
  count(start: string, end: string): Promise<number>;
  /**
   * Applies the mutations in order in one transaction. `validated`: the caller already validated them
   * against the schema (the manager does on the way in).
   */
  applyBatch(mutations: Mutation[], options?: { validated?: boolean }): Promise<MutationResult[]>;
  close(): Promise<void>;
}

/** The manager epoch that holds the store, as `reader` sees it (in a snapshot: as of the snapshot). */
export async function readEpoch(reader: MetaReader): Promise<number> {
  return parseEpoch(await reader.get(INSTANCE_ROW, EPOCH_COL));
}

/**
 * Every cell matching `request`, following pages of `limit` cells (default 10,000). Each page is one
 * consistent read; a write between pages may show in the later ones. Between pages it lets the event
 * loop turn: a read of every tablet on the in-process SQLite store would otherwise hold the thread for
 * as long as it takes (seconds at 100,000 tablets), and with it the ZooKeeper session's heartbeats.
 */
export async function* scanAll(
  reader: MetaReader,
  request: Omit<ScanRequest, 'after'>,
): AsyncGenerator<Cell> {
  const pageRequest = { ...request, limit: request.limit ?? 10_000 };
  let page = await reader.scan(pageRequest);
  for (;;) {
    yield* page.cells;
    if (!page.next) return;
    await new Promise((resolve) => setImmediate(resolve));
    page = await reader.scan({ ...pageRequest, after: page.next });
  }
}

/** Like {@link scanAll}, with each row's cells gathered into one {@link Row}. */
export async function* scanRows(
  reader: MetaReader,
  request: Omit<ScanRequest, 'after'>,
): AsyncGenerator<Row> {
  let current: Row | undefined;
  for await (const c of scanAll(reader, request)) {
    if (current?.row !== c.row) {
      if (current) yield current;
      current = { row: c.row, cols: new Map() };
    }
    current.cols.set(c.col, c.value);
  }
  if (current) yield current;
}
