/**
 * The metadata model (DESIGN.md, "Metadata store"): one sorted key space of cells (row, column → value),
 * changed only by conditional mutations. The zod schemas here validate the manager's HTTP API and type
 * its clients; the store applies the same shapes.
 */
import { z } from 'zod';
import { RESERVED_ROWS } from './keys.js';

/**
 * Rows and columns are printable ASCII, so that JavaScript's string order, SQLite's byte order and every
 * key codec agree. Values are any UTF-8 text (usually JSON) but NUL (U+0000), and so are scan bounds:
 * PostgreSQL's text cannot hold NUL (SQLSTATE 22021), so a value with one would fail the whole batch it
 * was group-committed with there (and a bound the scan), while SQLite stores it. Refused here, by name,
 * it fails alike on both backends and alone. (JSON.stringify writes NUL as an escape, never raw.)
 */
const PRINTABLE = /^[\x20-\x7e]*$/;
const keyString = z.string().min(1).max(4096).regex(PRINTABLE, 'must be printable ASCII');
const colString = z.string().max(4096).regex(PRINTABLE, 'must be printable ASCII');
const noNul = (s: string): boolean => !s.includes('\u0000');
const NUL_MESSAGE = 'must not contain NUL (U+0000)';
const value = z
  .string()
  .max(1 << 20)
  .refine(noNul, NUL_MESSAGE);
/** A scan bound or a row to read: not necessarily a key that exists, but text every backend can take. */
const bound = z.string().refine(noNul, NUL_MESSAGE);

export const cellSchema = z.object({ row: keyString, col: colString, value });
export type Cell = z.infer<typeof cellSchema>;

export const conditionSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('equals'), row: keyString, col: colString, value }),
  z.object({ op: z.literal('absent'), row: keyString, col: colString }),
  z.object({ op: z.literal('present'), row: keyString, col: colString }),
  /** No cell of the row has a column starting with `prefix` (e.g. no reservation: `ecomp:`). */
  z.object({ op: z.literal('noColumnWithPrefix'), row: keyString, prefix: colString }),
]);
export type Condition = z.infer<typeof conditionSchema>;

export const mutationSchema = z.object({
  /** All must hold, or nothing of this mutation is applied. */
  conditions: z.array(conditionSchema).max(10_000).default([]),
  puts: z.array(cellSchema).max(100_000).default([]),
  deletes: z
    .array(z.object({ row: keyString, col: colString }))
    .max(100_000)
    .default([]),
  /** Whole rows to delete (every column). */
  deleteRows: z.array(keyString).max(10_000).default([]),
});

/**
 * A mutation as the manager's API takes it from other processes: a {@link mutationSchema} that changes
 * no row reserved to the store itself (RESERVED_ROWS: the manager epoch that fences every write). Its
 * conditions may name such a row: they only read it.
 */
export const apiMutationSchema = mutationSchema.superRefine((m, ctx) => {
  const refuse = (path: (string | number)[], row: string): void => {
    ctx.addIssue({
      code: 'custom',
      path,
      message: `row ${row} is reserved to the metadata store (the manager epoch and id counters); it cannot be changed through the API`,
    });
  };
  m.puts.forEach((p, i) => RESERVED_ROWS.has(p.row) && refuse(['puts', i, 'row'], p.row));
  m.deletes.forEach((d, i) => RESERVED_ROWS.has(d.row) && refuse(['deletes', i, 'row'], d.row));
  m.deleteRows.forEach((row, i) => RESERVED_ROWS.has(row) && refuse(['deleteRows', i], row));
});

/** The most mutations one request of the manager's mutate route carries. */
export const MAX_MUTATIONS_PER_REQUEST = 10_000;

/**
 * The mutations of one request of the mutate route — also what MetaClient checks each caller's against
 * before grouping callers into one request, so that an invalid one fails its caller alone.
 */
export const apiMutationsSchema = z.array(apiMutationSchema).min(1).max(MAX_MUTATIONS_PER_REQUEST);
export type Mutation = z.input<typeof mutationSchema>;
export type ParsedMutation = z.output<typeof mutationSchema>;

export type MutationResult =
  | { applied: true }
  | {
      applied: false;
      /** Index of the first condition that did not hold, the condition, and what was found. */
      failed: { index: number; condition: Condition; actual: string | null };
    };

export const cursorSchema = z.object({ row: bound, col: bound });
export type Cursor = z.infer<typeof cursorSchema>;

export const scanSchema = z.object({
  /** Rows >= start (inclusive). */
  start: bound.optional(),
  /** Rows < end (exclusive). */
  end: bound.optional(),
  /** Only rows starting with this prefix (combined with start/end). */
  prefix: bound.optional(),
  /** Resume after this cell (from a previous page's `next`). */
  after: cursorSchema.optional(),
  /** Only columns starting with this prefix. */
  colPrefix: bound.optional(),
  limit: z.number().int().min(1).max(100_000).default(1_000),
});
export type ScanRequest = z.input<typeof scanSchema>;

/** A request for the cells of one row. */
export const rowRequestSchema = z.object({ row: bound.min(1) });
/** Rows one `/v1/meta/rows` request reads at most. */
export const MAX_ROWS_PER_READ = 1_000;
export const rowsRequestSchema = z.object({ rows: z.array(bound.min(1)).min(1).max(MAX_ROWS_PER_READ) });

export interface ScanPage {
  cells: Cell[];
  /** Present when more cells may follow: pass it as `after`. */
  next?: Cursor;
}

/** A row with its columns, as returned by row-oriented scans. */
export interface Row {
  row: string;
  cols: Map<string, string>;
}
