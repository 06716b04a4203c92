/**
 * The metadata store on PostgreSQL (`EXC_META=postgres://user:password@host:port/database`): the same
 * cells, order and conditional batches as the SQLite store (backend.ts), in one table:
 *
 *   cells (row TEXT COLLATE "C", col TEXT COLLATE "C", val TEXT, PRIMARY KEY (row, col))
 *
 * Rows and columns are printable ASCII, and the "C" collation compares them byte by byte, as SQLite and
 * JavaScript do; scans are index range scans on the primary key.
 *
 * A batch is one transaction. It first locks the one row of `writer_lock` (`SELECT … FOR UPDATE`): every
 * writer does, so batches are serialized, and a manager whose epoch is no longer the stored one (read
 * under that lock) fails with NOT_MANAGER before changing anything. It then reads every cell its conditions name in one query (and the columns of
 * each prefix condition), decides the whole batch in memory (batch.ts), and writes the net change in at
 * most three statements. A handful of round trips per batch, however many mutations it carries: the
 * commit queue's batches (group commit) make that per-commit cost small.
 *
 * Portability (CockroachDB, YugabyteDB): only plain SQL both implement — a composite primary key,
 * `INSERT … ON CONFLICT DO UPDATE`, `unnest` of arrays, row-value comparisons, `SELECT … FOR UPDATE`,
 * REPEATABLE READ (CockroachDB runs it as SERIALIZABLE) for snapshots. Avoided: advisory locks,
 * `LISTEN/NOTIFY`, sequences, stored procedures, `MERGE`, and server-side cursors. A transaction the
 * database aborts for a conflict (SQLSTATE 40001, 40P01: CockroachDB retries are the client's job) is
 * run again from the start; nothing of it was applied.
 *
 * Failures (postgres-errors.ts): a connection lost once COMMIT was sent is OUTCOME_UNKNOWN (it may have
 * committed), never UNAVAILABLE, which says "not applied" and would have the mutation sent again. Every
 * connection carries timeouts (`SESSION_SETTINGS`, postgres-pool.ts), so that a holder of the writers' lock
 * that stops (a paused manager) cannot hold it, and every other writer, for ever.
 */
import type pg from 'pg';
import { ExcError } from '../errors.js';
import { parseInput } from '../validate.js';
import { readEpoch, type MetaBackend, type MetaReader } from './backend.js';
import { batchReads, decideBatch, type NetChange } from './batch.js';
import { storeError } from './postgres-errors.js';
import { checkout, createPool, type Connection } from './postgres-pool.js';
import { EPOCH_COL, INSTANCE_ROW, parseEpoch, prefixEnd } from './keys.js';
import {
  mutationSchema,
  type Cell,
  type Mutation,
  type MutationResult,
  type ParsedMutation,
  type ScanPage,
  type ScanRequest,
} from './types.js';

const RETRIES = 10;

export interface PostgresOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** Connections at most (default 8). */
  poolSize?: number;
}

type Queryable = Pick<pg.PoolClient, 'query'>;

/** What the loser of two concurrent `CREATE TABLE IF NOT EXISTS` of one table gets (createTables). */
const CATALOG_RACE: ReadonlySet<string> = new Set(['23505', '42P07', '42710']);

export class PostgresBackend implements MetaBackend {
  readonly describe: string;
  private readonly pool: pg.Pool;
  private epoch: number | undefined;
  private closed = false;

  private constructor(options: PostgresOptions) {
    const url = new URL(options.url);
    this.describe = `postgres://${url.host}${url.pathname}`;
    this.pool = createPool(options.url, options.poolSize ?? 8);
  }

  /** Connects and creates the table when missing. */
  static async open(options: PostgresOptions): Promise<PostgresBackend> {
    const backend = new PostgresBackend(options);
    try {
      await backend.createTables();
    } catch (err) {
      await backend.pool.end().catch(() => undefined);
      throw storeError(err, backend.describe);
    }
    return backend;
  }

  /**
   * Creates the tables when missing. Two handles opening a new database at once race in PostgreSQL's
   * catalog (`IF NOT EXISTS` is not atomic there): the loser sees a duplicate — of the table's name
   * (42P07), of its row type (42710: found by a full test run), or a catalog unique key (23505) — and tries
   * again, when the table is there.
   */
  private async createTables(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.pool.query(
          'CREATE TABLE IF NOT EXISTS cells (row TEXT COLLATE "C" NOT NULL, col TEXT COLLATE "C" NOT NULL, val TEXT NOT NULL, PRIMARY KEY (row, col))',
        );
        await this.pool.query('CREATE TABLE IF NOT EXISTS writer_lock (id INT PRIMARY KEY)');
        await this.pool.query('INSERT INTO writer_lock (id) VALUES (1) ON CONFLICT (id) DO NOTHING');
        return;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code === 'string' && CATALOG_RACE.has(code) && attempt < 5) continue;
        throw err;
      }
    }
  }

  get managerEpoch(): number | undefined {
    return this.epoch;
  }

  async takeOver(): Promise<number> {
    const next = await this.transaction(async (c) => {
      const current = await lockEpoch(c);
      await upsert(c, [{ row: INSTANCE_ROW, col: EPOCH_COL, value: String(current + 1) }]);
      return current + 1;
    });
    this.epoch = next;
    return next;
  }

  async storedEpoch(): Promise<number> {
    return readEpoch(this);
  }

  get(row: string, col: string): Promise<string | undefined> {
    return this.read((c) => readCell(c, row, col));
  }

  row(row: string): Promise<Map<string, string>> {
    return this.read((c) => readRow(c, row));
  }

  scan(request: ScanRequest): Promise<ScanPage> {
    return this.read((c) => scanPage(c, request));
  }

  async count(start: string, end: string): Promise<number> {
    return this.read(async (c) => {
      const r = await c.query<{ n: string }>('SELECT COUNT(*) AS n FROM cells WHERE row >= $1 AND row < $2', [
        start,
        end,
      ]);
      return Number(r.rows[0]?.n ?? 0);
    });
  }

  async snapshot<T>(read: (reader: MetaReader) => Promise<T>): Promise<T> {
    this.checkOpen();
    const connection = await this.connect();
    const { client } = connection;
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const reader: MetaReader = {
        get: (row, col) => readCell(client, row, col),
        row: (row) => readRow(client, row),
        scan: (request) => scanPage(client, request),
      };
      const result = await read(reader);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      connection.release();
    }
  }

  async applyBatch(mutations: Mutation[], options: { validated?: boolean } = {}): Promise<MutationResult[]> {
    this.checkOpen();
    const parsed: ParsedMutation[] = options.validated
      ? mutations.map((m) => ({
          conditions: m.conditions ?? [],
          puts: m.puts ?? [],
          deletes: m.deletes ?? [],
          deleteRows: m.deleteRows ?? [],
        }))
      : mutations.map((m, i) => parseInput(mutationSchema, m, `mutations.${i}`));
    return this.transaction(async (c) => {
      const stored = await lockEpoch(c);
      if (this.epoch !== undefined && stored !== this.epoch) {
        throw new ExcError(
          'NOT_MANAGER',
          `this manager was fenced: the store is now held by epoch ${stored}, not ${this.epoch}`,
        );
      }
      const base = await readBase(c, parsed);
      const { results, change } = decideBatch(parsed, base);
      await writeChange(c, change);
      return results;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  private async read<T>(run: (c: Queryable) => Promise<T>): Promise<T> {
    this.checkOpen();
    try {
      return await run(this.pool);
    } catch (err) {
      throw storeError(err, this.describe);
    }
  }

  private async connect(): Promise<Connection> {
    try {
      return await checkout(this.pool);
    } catch (err) {
      throw storeError(err, this.describe);
    }
  }

  /** Runs `work` in a transaction, again from the start when the database aborts it for a conflict. */
  private async transaction<T>(work: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      this.checkOpen();
      const connection = await this.connect();
      const { client } = connection;
      let commitSent = false;
      try {
        await client.query('BEGIN');
        const result = await work(client);
        // On a connection already known to be broken, COMMIT never leaves: the server rolls back.
        commitSent = !connection.lost;
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (!connection.lost) await client.query('ROLLBACK').catch(() => undefined);
        const e = storeError(err, this.describe, { commitSent, connectionLost: connection.lost });
        // A conflict's ERROR (even COMMIT's) means the transaction was rolled back: run it again.
        const sqlState = e.details.sqlState;
        if (e.code === 'UNAVAILABLE' && (sqlState === '40001' || sqlState === '40P01') && attempt < RETRIES)
          continue;
        throw e;
      } finally {
        connection.release();
      }
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new ExcError('SHUTTING_DOWN', 'metadata store is closed');
  }
}

/** Takes the writers' lock for this transaction and returns the stored epoch (0 before any takeover). */
async function lockEpoch(c: Queryable): Promise<number> {
  await c.query('SELECT id FROM writer_lock WHERE id = 1 FOR UPDATE');
  return parseEpoch((await readCell(c, INSTANCE_ROW, EPOCH_COL)) ?? undefined);
}

async function readCell(c: Queryable, row: string, col: string): Promise<string | undefined> {
  const r = await c.query<{ val: string }>('SELECT val FROM cells WHERE row = $1 AND col = $2', [row, col]);
  return r.rows[0]?.val;
}

async function readRow(c: Queryable, row: string): Promise<Map<string, string>> {
  const r = await c.query<{ col: string; val: string }>(
    'SELECT col, val FROM cells WHERE row = $1 ORDER BY col',
    [row],
  );
  return new Map(r.rows.map((x) => [x.col, x.val]));
}

async function scanPage(c: Queryable, request: ScanRequest): Promise<ScanPage> {
  const limit = request.limit ?? 1_000;
  const where: string[] = [];
  const params: string[] = [];
  const param = (v: string): string => {
    params.push(v);
    return `$${params.length}`;
  };
  let start = request.start;
  let end = request.end;
  if (request.prefix !== undefined) {
    if (start === undefined || start < request.prefix) start = request.prefix;
    const pEnd = prefixEnd(request.prefix);
    if (pEnd !== undefined && (end === undefined || end > pEnd)) end = pEnd;
  }
  if (start !== undefined) where.push(`row >= ${param(start)}`);
  if (end !== undefined) where.push(`row < ${param(end)}`);
  if (request.after) where.push(`(row, col) > (${param(request.after.row)}, ${param(request.after.col)})`);
  if (request.colPrefix !== undefined && request.colPrefix !== '') {
    where.push(`col >= ${param(request.colPrefix)}`);
    const cEnd = prefixEnd(request.colPrefix);
    if (cEnd !== undefined) where.push(`col < ${param(cEnd)}`);
  }
  const sql = `SELECT row, col, val FROM cells ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY row, col LIMIT ${param(String(limit + 1))}`;
  const r = await c.query<{ row: string; col: string; val: string }>(sql, params);
  const more = r.rows.length > limit;
  const cells: Cell[] = r.rows.slice(0, limit).map((x) => ({ row: x.row, col: x.col, value: x.val }));
  const last = cells[cells.length - 1];
  return more && last ? { cells, next: { row: last.row, col: last.col } } : { cells };
}

/** The cells a batch's conditions read, in one query (two with prefix conditions). */
async function readBase(c: Queryable, mutations: readonly ParsedMutation[]) {
  const reads = batchReads(mutations);
  const values = new Map<string, string>();
  if (reads.cells.length > 0) {
    const r = await c.query<{ row: string; col: string; val: string }>(
      'SELECT c.row, c.col, c.val FROM cells c JOIN unnest($1::text[], $2::text[]) AS k(row, col) ON c.row = k.row AND c.col = k.col',
      [reads.cells.map((x) => x.row), reads.cells.map((x) => x.col)],
    );
    for (const x of r.rows) values.set(`${x.row}\n${x.col}`, x.val);
  }
  const columns = new Map<string, string[]>();
  if (reads.prefixes.length > 0) {
    // Every column of the row with the prefix (a prefix with no end bound: every column from it on).
    const r = await c.query<{ i: number; col: string }>(
      `SELECT k.i::int AS i, c.col FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(row, lo, hi, i)
       JOIN cells c ON c.row = k.row AND c.col >= k.lo AND (k.hi IS NULL OR c.col < k.hi)`,
      [
        reads.prefixes.map((x) => x.row),
        reads.prefixes.map((x) => x.prefix),
        reads.prefixes.map((x) => prefixEnd(x.prefix) ?? null),
      ],
    );
    for (const x of r.rows) {
      const p = reads.prefixes[x.i - 1]!;
      const k = `${p.row}\n${p.prefix}`;
      columns.set(k, [...(columns.get(k) ?? []), x.col]);
    }
  }
  return {
    value: (row: string, col: string) => values.get(`${row}\n${col}`),
    columns: (row: string, prefix: string) => columns.get(`${row}\n${prefix}`) ?? [],
  };
}

/** Writes a batch's net change: wiped rows first, then deletes and puts. */
async function writeChange(c: Queryable, change: NetChange): Promise<void> {
  if (change.wipedRows.length > 0)
    await c.query('DELETE FROM cells WHERE row = ANY($1::text[])', [change.wipedRows]);
  if (change.deletes.length > 0) {
    await c.query(
      'DELETE FROM cells c USING unnest($1::text[], $2::text[]) AS k(row, col) WHERE c.row = k.row AND c.col = k.col',
      [change.deletes.map((d) => d.row), change.deletes.map((d) => d.col)],
    );
  }
  await upsert(c, change.puts);
}

async function upsert(c: Queryable, cells: readonly Cell[]): Promise<void> {
  if (cells.length === 0) return;
  await c.query(
    'INSERT INTO cells (row, col, val) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT (row, col) DO UPDATE SET val = EXCLUDED.val',
    [cells.map((x) => x.row), cells.map((x) => x.col), cells.map((x) => x.value)],
  );
}
