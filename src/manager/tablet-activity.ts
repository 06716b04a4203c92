/**
 * What the admin views and the queue metrics need of every tablet, kept by the mutations the manager
 * applies (followed-index.ts), so that none of them reads every tablet:
 *
 * - which tablets have work — a reservation, a queue entry, a failure record, a pending user compaction,
 *   a split job or a selection (`ecomp:`, `queued:`, `failed:`, `compact:`, `split:`, `selected`): the
 *   only tablets the compaction listings, the queue views and the queue metrics read ({@link busyTablets});
 * - how many tablets each tablet server hosts and how many bytes they hold: `admin tserver list`.
 *
 * An idle tablet costs an entry with its host and its files' sizes (about 250 bytes with one file, plus
 * about 100 a file more: measured in bench/scale-tablets.ts); a busy one its working columns' names too.
 */
import type { MetaReader } from '../meta/backend.js';
import { ALL_TABLETS, isTabletRow } from '../meta/keys.js';
import {
  COL_LOC,
  COL_SELECTED,
  COMPACT_PREFIX,
  ECOMP_PREFIX,
  FAILED_PREFIX,
  FILE_PREFIX,
  QUEUED_PREFIX,
  SPLIT_PREFIX,
  parseTablet,
  type TabletMeta,
} from '../meta/tablet.js';
import type { CellTable, FollowedIndex } from './followed-index.js';
import { readTablets } from './tables.js';

const WORK_PREFIXES = [ECOMP_PREFIX, QUEUED_PREFIX, FAILED_PREFIX, COMPACT_PREFIX, SPLIT_PREFIX];
const isWork = (col: string): boolean => col === COL_SELECTED || WORK_PREFIXES.some((p) => col.startsWith(p));

interface RowState {
  server?: string;
  /** File → size. */
  files?: Map<string, number>;
  bytes: number;
  /** The row's working columns (none: idle). */
  work?: Set<string>;
}

/** A field of a JSON value, or undefined when the value is not JSON or the field not of that type. */
function field<T extends 'string' | 'number'>(value: string, name: string, type: T) {
  try {
    const v = (JSON.parse(value) as Record<string, unknown>)[name];
    return (typeof v === type ? v : undefined) as (T extends 'string' ? string : number) | undefined;
  } catch {
    return undefined;
  }
}

export class ActivityTable implements CellTable<ActivityTable> {
  private readonly rows = new Map<string, RowState>();
  /** Tablet rows with work. */
  readonly busy = new Set<string>();
  /** Per tablet server: the tablets it hosts and their bytes. */
  readonly hosts = new Map<string, { tablets: number; bytes: number }>();
  /** One string per server name, shared by the rows it hosts. */
  private readonly names = new Map<string, string>();

  /** Tablet rows known. */
  get tablets(): number {
    return this.rows.size;
  }

  put(row: string, col: string, value: string): void {
    if (!isTabletRow(row)) return;
    if (col === COL_LOC) return this.host(row, field(value, 'server', 'string'));
    if (col.startsWith(FILE_PREFIX)) return this.file(row, col, field(value, 'size', 'number') ?? 0);
    if (!isWork(col)) return;
    (this.state(row).work ??= new Set()).add(col);
    this.busy.add(row);
  }

  delete(row: string, col: string): void {
    const s = this.rows.get(row);
    if (!s) return;
    if (col === COL_LOC) this.host(row, undefined);
    else if (col.startsWith(FILE_PREFIX)) this.file(row, col, undefined);
    else if (s.work?.delete(col) && s.work.size === 0) {
      delete s.work;
      this.busy.delete(row);
    }
    this.dropIfEmpty(row, s);
  }

  deleteRow(row: string): void {
    if (!this.rows.has(row)) return;
    this.host(row, undefined);
    this.rows.delete(row);
    this.busy.delete(row);
  }

  differences(other: ActivityTable): string[] {
    const out: string[] = [];
    for (const r of this.busy) if (!other.busy.has(r)) out.push(`busy ${r}`);
    for (const r of other.busy) if (!this.busy.has(r)) out.push(`busy ${r}`);
    for (const [server, h] of this.hosts) {
      const o = other.hosts.get(server);
      if (o?.tablets !== h.tablets || o.bytes !== h.bytes) out.push(`host ${server}`);
    }
    for (const server of other.hosts.keys()) if (!this.hosts.has(server)) out.push(`host ${server}`);
    return out.slice(0, 20);
  }

  private state(row: string): RowState {
    let s = this.rows.get(row);
    if (!s) this.rows.set(row, (s = { bytes: 0 }));
    return s;
  }

  private dropIfEmpty(row: string, s: RowState): void {
    if (s.server === undefined && !s.files && !s.work) this.rows.delete(row);
  }

  private hostOf(server: string): { tablets: number; bytes: number } {
    let h = this.hosts.get(server);
    if (!h) this.hosts.set(server, (h = { tablets: 0, bytes: 0 }));
    return h;
  }

  private host(row: string, server: string | undefined): void {
    const s = server === undefined ? this.rows.get(row) : this.state(row);
    if (!s || s.server === server) return;
    if (s.server !== undefined) {
      const h = this.hostOf(s.server);
      h.tablets--;
      h.bytes -= s.bytes;
      if (h.tablets === 0) this.hosts.delete(s.server);
    }
    if (server === undefined) delete s.server;
    else {
      let name = this.names.get(server);
      if (name === undefined) this.names.set(server, (name = server));
      s.server = name;
      const h = this.hostOf(name);
      h.tablets++;
      h.bytes += s.bytes;
    }
    this.dropIfEmpty(row, s);
  }

  private file(row: string, col: string, size: number | undefined): void {
    const s = size === undefined ? this.rows.get(row) : this.state(row);
    if (!s) return;
    const before = s.files?.get(col) ?? 0;
    if (size === undefined) {
      if (!s.files?.delete(col)) return;
      if (s.files.size === 0) delete s.files;
    } else (s.files ??= new Map()).set(col, size);
    const change = (size ?? 0) - before;
    s.bytes += change;
    if (s.server !== undefined) this.hostOf(s.server).bytes += change;
    this.dropIfEmpty(row, s);
  }
}

/** The index of activity, as the views get it. */
export type ActivityIndex = FollowedIndex<ActivityTable>;

/**
 * The tablets with work, read from the store (each row as it is now). When most tablets have work, one
 * read of them all is cheaper than a read of each.
 */
export async function busyTablets(store: MetaReader, activity: ActivityIndex): Promise<TabletMeta[]> {
  const table = await activity.current();
  if (table.busy.size * 20 > table.tablets) return readTablets(store, ALL_TABLETS.start, ALL_TABLETS.end);
  const rows = [...table.busy].sort();
  const out: TabletMeta[] = [];
  for (let i = 0; i < rows.length; i += 16) {
    const read = await Promise.all(
      rows.slice(i, i + 16).map(async (row) => ({ row, cols: await store.row(row) })),
    );
    for (const { row, cols } of read) if (cols.size > 0) out.push(parseTablet(row, cols));
  }
  return out;
}
