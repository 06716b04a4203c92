/**
 * The sorted metadata store on SQLite (better-sqlite3, WAL, synchronous=FULL): one table of cells keyed by
 * (row, col), scanned in key order, changed only by conditional mutations.
 *
 * A batch of mutations is applied in one transaction, in order: each mutation's conditions are checked
 * against the state left by the mutations before it, and it is applied whole or not at all. One fsync per
 * batch is what lets many concurrent callers share the cost of durability (group commit).
 *
 * Fencing: every write transaction first checks that the store's manager epoch is still the one this
 * handle took over with. A manager that lost its lock (a zombie resumed after a pause) and still holds the
 * file open can then no longer change anything: its transactions fail with NOT_MANAGER.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ExcError } from '../errors.js';
import { parseInput } from '../validate.js';
import { EPOCH_COL, INSTANCE_ROW, parseEpoch, prefixEnd } from './keys.js';
import {
  mutationSchema,
  type Cell,
  type Condition,
  type Mutation,
  type MutationResult,
  type ParsedMutation,
  type Row,
  type ScanPage,
  type ScanRequest,
} from './types.js';

export interface MetaStoreOptions {
  /** Path of the SQLite file (created with its directory when missing), or ':memory:'. */
  path: string;
  /** How long a statement waits for a lock another process holds (default 5 s). */
  busyTimeoutMs?: number;
  /**
   * A read-only connection to an existing store (a snapshot held across awaits, sqlite-backend.ts): it
   * creates nothing and can only read.
   */
  readOnly?: boolean;
}

/**
 * SQLite refused a lock another process holds — a manager paused in the middle of a write keeps its write
 * lock until it resumes (then its write fails on the epoch check, or commits before the takeover). Worth
 * another try: UNAVAILABLE.
 */
export function lockRefusal(err: unknown): ExcError | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_BUSY')) return undefined;
  return new ExcError(
    'UNAVAILABLE',
    `the metadata store is locked by another process: ${(err as Error).message}`,
    {
      cause: err,
    },
  );
}

export class MetaStore {
  private readonly db: Database.Database;
  private epoch: number | undefined;
  private readonly stmts: ReturnType<MetaStore['prepare']>;
  private closed = false;
  /** Scans differ only in which bounds they have: a handful of statement shapes, prepared once each. */
  private readonly scanStatements = new Map<
    string,
    Database.Statement<string[], { row: string; col: string; val: string }>
  >();

  readonly path: string;

  constructor(options: MetaStoreOptions) {
    this.path = options.path;
    if (options.readOnly) {
      this.db = new Database(options.path, { readonly: true, fileMustExist: true });
      this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5_000}`);
    } else {
      if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
      this.db = new Database(options.path);
      // First: every later statement, the journal mode included, may meet another process's lock.
      this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5_000}`);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.exec(
        'CREATE TABLE IF NOT EXISTS cells (row TEXT NOT NULL, col TEXT NOT NULL, val TEXT NOT NULL, PRIMARY KEY (row, col)) WITHOUT ROWID',
      );
    }
    this.stmts = this.prepare();
  }

  /**
   * Opens a read transaction on this connection and pins its snapshot (WAL: the first read does), so that
   * reads until {@link endRead} see one committed state, across awaits. For a read-only connection of its
   * own: any other use of the connection meanwhile would share the transaction.
   */
  beginRead(): void {
    this.checkOpen();
    this.db.exec('BEGIN');
    this.storedEpoch();
  }

  endRead(): void {
    if (this.db.inTransaction) this.db.exec('COMMIT');
  }

  private prepare() {
    const db = this.db;
    return {
      get: db.prepare<[string, string], { val: string }>('SELECT val FROM cells WHERE row = ? AND col = ?'),
      rowCells: db.prepare<[string], { col: string; val: string }>(
        'SELECT col, val FROM cells WHERE row = ? ORDER BY col',
      ),
      colWithPrefix: db.prepare<[string, string, string], { col: string }>(
        'SELECT col FROM cells WHERE row = ? AND col >= ? AND col < ? LIMIT 1',
      ),
      colWithPrefixOpen: db.prepare<[string, string], { col: string }>(
        'SELECT col FROM cells WHERE row = ? AND col >= ? LIMIT 1',
      ),
      put: db.prepare<[string, string, string]>(
        'INSERT OR REPLACE INTO cells (row, col, val) VALUES (?, ?, ?)',
      ),
      del: db.prepare<[string, string]>('DELETE FROM cells WHERE row = ? AND col = ?'),
      delRow: db.prepare<[string]>('DELETE FROM cells WHERE row = ?'),
      count: db.prepare<[string, string], { n: number }>(
        'SELECT COUNT(*) AS n FROM cells WHERE row >= ? AND row < ?',
      ),
    };
  }

  /**
   * Takes over the store for a new manager: increments the epoch and fences every older holder. Returns
   * the new epoch.
   */
  takeOver(): number {
    const next = this.db.transaction(() => {
      const current = parseEpoch(this.stmts.get.get(INSTANCE_ROW, EPOCH_COL)?.val);
      this.stmts.put.run(INSTANCE_ROW, EPOCH_COL, String(current + 1));
      return current + 1;
    })();
    this.epoch = next;
    return next;
  }

  get managerEpoch(): number | undefined {
    return this.epoch;
  }

  /**
   * The epoch of the manager that holds the store now, read from the file (0 before any takeover). A
   * reader compares it with the epoch its manager took over with, to learn without writing that it was
   * fenced (the garbage collector does before every delete).
   */
  storedEpoch(): number {
    this.checkOpen();
    return parseEpoch(this.stmts.get.get(INSTANCE_ROW, EPOCH_COL)?.val);
  }

  /** Reads one cell. */
  get(row: string, col: string): string | undefined {
    this.checkOpen();
    return this.stmts.get.get(row, col)?.val;
  }

  /** The cells of one row, in column order. */
  row(row: string): Map<string, string> {
    this.checkOpen();
    return new Map(this.stmts.rowCells.all(row).map((c) => [c.col, c.val]));
  }

  /** Cells in key order, at most `limit`; `next` resumes the scan. */
  scan(request: ScanRequest): ScanPage {
    this.checkOpen();
    const limit = request.limit ?? 1_000;
    const where: string[] = [];
    const params: string[] = [];
    let start = request.start;
    let end = request.end;
    if (request.prefix !== undefined) {
      if (start === undefined || start < request.prefix) start = request.prefix;
      const pEnd = prefixEnd(request.prefix);
      if (pEnd !== undefined && (end === undefined || end > pEnd)) end = pEnd;
    }
    if (start !== undefined) {
      where.push('row >= ?');
      params.push(start);
    }
    if (end !== undefined) {
      where.push('row < ?');
      params.push(end);
    }
    if (request.after) {
      where.push('(row, col) > (?, ?)');
      params.push(request.after.row, request.after.col);
    }
    if (request.colPrefix !== undefined && request.colPrefix !== '') {
      where.push('col >= ?');
      params.push(request.colPrefix);
      const cEnd = prefixEnd(request.colPrefix);
      if (cEnd !== undefined) {
        where.push('col < ?');
        params.push(cEnd);
      }
    }
    params.push(String(limit + 1));
    const sql = `SELECT row, col, val FROM cells ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY row, col LIMIT CAST(? AS INTEGER)`;
    let stmt = this.scanStatements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare<string[], { row: string; col: string; val: string }>(sql);
      this.scanStatements.set(sql, stmt);
    }
    const rows = stmt.all(...params);
    const more = rows.length > limit;
    const cells: Cell[] = rows.slice(0, limit).map((r) => ({ row: r.row, col: r.col, value: r.val }));
    const last = cells[cells.length - 1];
    return more && last ? { cells, next: { row: last.row, col: last.col } } : { cells };
  }

  /**
   * Every cell matching `request`, following pages of `limit` cells (default 10 000). Each page is one
   * consistent read; a write between pages may show in the later ones.
   */
  *scanAll(request: Omit<ScanRequest, 'after'>): Generator<Cell> {
    const pageRequest = { ...request, limit: request.limit ?? 10_000 };
    let page = this.scan(pageRequest);
    for (;;) {
      yield* page.cells;
      if (!page.next) return;
      page = this.scan({ ...pageRequest, after: page.next });
    }
  }

  /** Like {@link scanAll}, with each row's cells gathered into one {@link Row}. */
  *scanRows(request: Omit<ScanRequest, 'after'>): Generator<Row> {
    let current: Row | undefined;
    for (const c of this.scanAll(request)) {
      if (current?.row !== c.row) {
        if (current) yield current;
        current = { row: c.row, cols: new Map() };
      }
      current.cols.set(c.col, c.value);
    }
    if (current) yield current;
  }

  /**
   * Runs `read` in one read transaction: every read inside it sees the same committed state, whatever is
   * committed meanwhile (WAL keeps the snapshot), unlike the pages of {@link scanAll}. `read` must be
   * synchronous and only read. For views that must not mix before and after a commit (the consistency
   * check reads tablets and queue entries together).
   */
  snapshot<T>(read: () => T): T {
    this.checkOpen();
    return this.db.transaction(read)();
  }

  /** Number of cells in rows [start, end). */
  count(start: string, end: string): number {
    return this.stmts.count.get(start, end)?.n ?? 0;
  }

  /** Applies one conditional mutation (see {@link applyBatch}). */
  mutate(mutation: Mutation): MutationResult {
    return this.applyBatch([mutation])[0]!;
  }

  /**
   * Applies the mutations in order in one transaction (one fsync). Each is applied whole when all its
   * conditions hold and rejected whole, with the first failing condition, otherwise.
   */
  applyBatch(mutations: Mutation[], options: { validated?: boolean } = {}): MutationResult[] {
    this.checkOpen();
    // Mutations that were validated on the way in (the manager validates each submission) are only given
    // their defaults; the schema is not run twice on the hot path.
    const parsed: ParsedMutation[] = options.validated
      ? mutations.map((m) => ({
          conditions: m.conditions ?? [],
          puts: m.puts ?? [],
          deletes: m.deletes ?? [],
          deleteRows: m.deleteRows ?? [],
        }))
      : mutations.map((m, i) => parseInput(mutationSchema, m, `mutations.${i}`));
    return this.db.transaction(() => {
      this.checkEpoch();
      return parsed.map((m) => this.applyOne(m));
    })();
  }

  private applyOne(m: ParsedMutation): MutationResult {
    for (const [index, condition] of m.conditions.entries()) {
      const actual = this.evaluate(condition);
      if (!actual.holds) return { applied: false, failed: { index, condition, actual: actual.value } };
    }
    for (const d of m.deletes) this.stmts.del.run(d.row, d.col);
    for (const row of m.deleteRows) this.stmts.delRow.run(row);
    for (const p of m.puts) this.stmts.put.run(p.row, p.col, p.value);
    return { applied: true };
  }

  private evaluate(c: Condition): { holds: boolean; value: string | null } {
    if (c.op === 'noColumnWithPrefix') {
      const end = prefixEnd(c.prefix);
      const found =
        end === undefined
          ? this.stmts.colWithPrefixOpen.get(c.row, c.prefix)
          : this.stmts.colWithPrefix.get(c.row, c.prefix, end);
      return { holds: found === undefined, value: found?.col ?? null };
    }
    const value = this.stmts.get.get(c.row, c.col)?.val ?? null;
    switch (c.op) {
      case 'equals':
        return { holds: value === c.value, value };
      case 'absent':
        return { holds: value === null, value };
      case 'present':
        return { holds: value !== null, value };
    }
  }

  private checkEpoch(): void {
    if (this.epoch === undefined) return; // not fenced (tools and tests that own the file alone)
    const current = parseEpoch(this.stmts.get.get(INSTANCE_ROW, EPOCH_COL)?.val);
    if (current !== this.epoch) {
      throw new ExcError(
        'NOT_MANAGER',
        `this manager was fenced: the store is now held by epoch ${current}, not ${this.epoch}`,
      );
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new ExcError('SHUTTING_DOWN', 'metadata store is closed');
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
