/**
 * Key codecs for the metadata rows (DESIGN.md, "Metadata store").
 *
 *   tablet      <tableId>;<hex(endRow)>        the last tablet of a table: <tableId><
 *   queue entry ~cq:<queueId>:<bin>:<priority>:<tableId>:<hex(endRow) | "<">
 *   deletion    ~del:<path>
 *   table       ~table:<tableId>               name lookup: ~tname:<name>
 *
 * End rows are arbitrary bytes. They are written as lower-case hex: byte order is preserved (hex digits
 * sort like the nibbles they encode, and a shorter prefix sorts first), and the result never contains a
 * separator. In tablet rows ';' (0x3B) sorts before '<' (0x3C), so a table's last tablet sorts after all
 * its other tablets, and the first tablet row >= <tableId>;<hex(r)> is the tablet holding row r.
 *
 * Bins are 4 hex digits. Priorities are 8 hex digits of (0xffffffff - priority), so within a bin the
 * highest priority sorts first and a compactor takes the first entry.
 *
 * Table and queue ids are exactly 4 base-36 characters. A fixed width is what makes every encoded key sort
 * exactly like the tuple it encodes: with variable-length ids the separators (':' and ';' sort between
 * digits and letters) would put "12" before "1".
 */
import { ExcError } from '../errors.js';

export const ID_LENGTH = 4;
export const TABLE_ID_RE = /^[0-9a-z]{4}$/;
export const QUEUE_ID_RE = /^[0-9a-z]{4}$/;

/** The id for a counter value: 4 base-36 digits. */
export function formatId(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n >= 36 ** ID_LENGTH)
    throw new ExcError('CONFLICT', `id space exhausted: ${n}`);
  return n.toString(36).padStart(ID_LENGTH, '0');
}
export const MAX_BINS = 0x1000;
export const MAX_PRIORITY = 0xffffffff;

export type EndRow = Buffer | null;

export function hex(bytes: Buffer): string {
  return bytes.toString('hex');
}

function unhex(text: string, what: string): Buffer {
  if (!/^(?:[0-9a-f]{2})*$/.test(text))
    throw new ExcError('BAD_REQUEST', `${what}: not a hex byte string: ${text}`);
  return Buffer.from(text, 'hex');
}

function checkTableId(tableId: string): void {
  if (!TABLE_ID_RE.test(tableId))
    throw new ExcError('BAD_REQUEST', `invalid table id ${JSON.stringify(tableId)}`);
}

function checkQueueId(queueId: string): void {
  if (!QUEUE_ID_RE.test(queueId))
    throw new ExcError('BAD_REQUEST', `invalid queue id ${JSON.stringify(queueId)}`);
}

// --- tablets ---------------------------------------------------------------------------------------------

export function tabletRow(tableId: string, endRow: EndRow): string {
  checkTableId(tableId);
  return endRow === null ? `${tableId}<` : `${tableId};${hex(endRow)}`;
}

export function parseTabletRow(row: string): { tableId: string; endRow: EndRow } {
  const m = /^([0-9a-z]{4})(?:;((?:[0-9a-f]{2})*)|(<))$/.exec(row);
  if (!m) throw new ExcError('BAD_REQUEST', `not a tablet row: ${JSON.stringify(row)}`);
  return { tableId: m[1]!, endRow: m[3] ? null : unhex(m[2]!, 'tablet end row') };
}

/** The first and the after-last row of a table's tablets, for a range scan [start, end). */
export function tableRange(tableId: string): { start: string; end: string } {
  checkTableId(tableId);
  return { start: `${tableId};`, end: `${tableId}=` }; // '=' is the character after '<'
}

/** Every tablet row, for a range scan [start, end): table ids sort between '0000' and '~'. */
export const ALL_TABLETS = { start: '0000', end: '~' } as const;

/** Whether `row` is a tablet's row (in {@link ALL_TABLETS}), not one of the store's own `~` rows. */
export const isTabletRow = (row: string): boolean => row >= ALL_TABLETS.start && row < ALL_TABLETS.end;

// --- queue entries -----------------------------------------------------------------------------------------

export interface QueueEntry {
  queueId: string;
  bin: number;
  priority: number;
  tableId: string;
  endRow: EndRow;
}

function binText(bin: number): string {
  if (!Number.isInteger(bin) || bin < 0 || bin >= MAX_BINS)
    throw new ExcError('BAD_REQUEST', `bin out of range: ${bin}`);
  return bin.toString(16).padStart(4, '0');
}

function priorityText(priority: number): string {
  if (!Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY) {
    throw new ExcError('BAD_REQUEST', `priority out of range: ${priority}`);
  }
  return (MAX_PRIORITY - priority).toString(16).padStart(8, '0');
}

export function queueRow(entry: QueueEntry): string {
  checkQueueId(entry.queueId);
  checkTableId(entry.tableId);
  const end = entry.endRow === null ? '<' : hex(entry.endRow);
  return `~cq:${entry.queueId}:${binText(entry.bin)}:${priorityText(entry.priority)}:${entry.tableId}:${end}`;
}

export function parseQueueRow(row: string): QueueEntry {
  const m = /^~cq:([0-9a-z]{4}):([0-9a-f]{4}):([0-9a-f]{8}):([0-9a-z]{4}):((?:[0-9a-f]{2})*|<)$/.exec(row);
  if (!m) throw new ExcError('BAD_REQUEST', `not a queue row: ${JSON.stringify(row)}`);
  return {
    queueId: m[1]!,
    bin: parseInt(m[2]!, 16),
    priority: MAX_PRIORITY - parseInt(m[3]!, 16),
    tableId: m[4]!,
    endRow: m[5] === '<' ? null : unhex(m[5]!, 'queue entry end row'),
  };
}

/** Prefix of every entry of a queue, or of one bin of it. */
export function queuePrefix(queueId: string, bin?: number): string {
  checkQueueId(queueId);
  return bin === undefined ? `~cq:${queueId}:` : `~cq:${queueId}:${binText(bin)}:`;
}

/** The tablet row a queue entry stands for. */
export function queueEntryTablet(entry: QueueEntry): string {
  return tabletRow(entry.tableId, entry.endRow);
}

/** The bin of a tablet in a queue with `bins` bins: a stable hash of table id and end row. */
export function binOf(tablet: string, bins: number): number {
  // FNV-1a over the tablet row: cheap, stable across processes and versions.
  let h = 0x811c9dc5;
  for (let i = 0; i < tablet.length; i++) {
    h ^= tablet.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % bins;
}

// --- deletions and tables ------------------------------------------------------------------------------------

export const DEL_PREFIX = '~del:';
export function delRow(path: string): string {
  return `${DEL_PREFIX}${path}`;
}

export const TABLE_PREFIX = '~table:';
export function tableRow(tableId: string): string {
  checkTableId(tableId);
  return `${TABLE_PREFIX}${tableId}`;
}
export const TABLE_NAME_PREFIX = '~tname:';
export function tableNameRow(name: string): string {
  return `${TABLE_NAME_PREFIX}${name}`;
}

/** Instance-wide singletons: id counters and the manager epoch. */
export const INSTANCE_ROW = '~instance';
/** The column of {@link INSTANCE_ROW} holding the epoch of the manager that holds the store. */
export const EPOCH_COL = 'managerEpoch';

/**
 * Rows no other process may change through the manager's API (its raw mutate route): the manager alone
 * writes them, in its own transactions. `~instance` holds the epoch that fences every write — a value
 * written there from outside would fence every manager for good, or let a paused old one write again —
 * and the table id counter. The rows other processes write under '~' (queue entries, deletion marks,
 * outcomes, ingest ids) are theirs to write.
 */
export const RESERVED_ROWS: ReadonlySet<string> = new Set([INSTANCE_ROW]);

/**
 * The manager epoch as stored in {@link INSTANCE_ROW} (absent: 0, before any takeover). Anything but a
 * whole number is refused with CONFIG_INVALID naming the cell and what it holds: read as NaN it would
 * equal no epoch, and every write of every manager would be refused as fenced.
 */
export function parseEpoch(text: string | undefined): number {
  if (text === undefined) return 0;
  const epoch = Number(text);
  if (!/^(?:0|[1-9][0-9]*)$/.test(text) || !Number.isSafeInteger(epoch)) {
    throw new ExcError(
      'CONFIG_INVALID',
      `the metadata store's manager epoch (row ${INSTANCE_ROW}, column ${EPOCH_COL}) is not a whole number: ${JSON.stringify(text.slice(0, 100))}`,
      { details: { row: INSTANCE_ROW, col: EPOCH_COL, value: text.slice(0, 100) } },
    );
  }
  return epoch;
}

/** The smallest string greater than every string that starts with `prefix`. */
export function prefixEnd(prefix: string): string | undefined {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const code = prefix.charCodeAt(i);
    if (code < 0xffff) return prefix.slice(0, i) + String.fromCharCode(code + 1);
  }
  return undefined;
}
