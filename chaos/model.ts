/**
 * The chaos run's exact model of a table: what a scan must return, given every write the cluster
 * acknowledged, the table's `versions` and `ttl`, and the user compactions with filters that completed.
 *
 * It is kept small enough for a run of hours: per cell only the newest delete and the newest `versions`
 * puts above it. A put beyond those can never show again (a delete hides every version at or below its
 * timestamp, a suffix of the cell's versions, so it can only hide what is older than the kept puts too).
 * Values are not stored: each put's value is a hash of the run's seed, the cell and the timestamp, so a
 * scanned value is checked against what was written, and an entry that should be hidden but shows is
 * recognised as one of ours (resurrected) rather than something never written (wrong). A table with
 * `valueBytes` gets values of a size drawn from that range by the same hash, from an extendable-output
 * hash in base64url, which compresses to about three quarters: its files, and so its compactions, stay
 * close to the size of its data.
 *
 * Writes are applied in whatever order they are acknowledged: the result does not depend on it
 * (timestamps decide, and the generator never reuses a cell's timestamp nor writes a put at or below a
 * delete it issued for that cell, which a full compaction may have forgotten).
 */
import { createHash } from 'node:crypto';
import { Counters } from './counters.js';

export interface ChaosEntry {
  row: string;
  cf: string;
  cq: string;
  /** The writer's timestamp; 0 for a counter's entry (the tablet server stamps those: counters.ts). */
  ts: number;
  delete?: boolean;
  /** A counter's increment (a put of its decimal value). */
  delta?: number;
}

export interface ScannedLine {
  row: string;
  cf: string;
  cq: string;
  ts: number;
  value: string;
}

interface Cell {
  row: string;
  cf: string;
  cq: string;
  maxDelete: number;
  /** Newest first, at most `versions`, all above maxDelete. */
  puts: number[];
}

export interface Comparison {
  expected: number;
  scanned: number;
  lost: number;
  resurrected: number;
  wrong: number;
  /** Live counters among `expected` (a table with a combiner). */
  counters?: number;
  /** A few examples of each problem, for the report. */
  examples: string[];
}

export const cellKey = (row: string, cf: string, cq: string): string => `${row}\u0000${cf}\u0000${cq}`;

export class TableModel {
  private readonly cells = new Map<string, Cell>();
  /** The counters of a table that sums a family (counters.ts). */
  readonly counters?: Counters;

  constructor(
    readonly name: string,
    private readonly seed: string,
    readonly versions: number,
    /** Puts older than this (relative to now) are aged off; the generator keeps far from the boundary. */
    readonly ttlMs?: number,
    /** Values of between these many bytes (default: 16). */
    readonly valueBytes?: readonly [number, number],
    /** The family the table sums: its cells are counters. */
    counterFamily?: string,
  ) {
    if (counterFamily !== undefined) this.counters = new Counters(counterFamily);
  }

  /** The value written for a put: derived, so that it need not be stored. */
  valueOf(row: string, cf: string, cq: string, ts: number): string {
    const input = `${this.seed}\u0000${cellKey(row, cf, cq)}\u0000${ts}`;
    const short = createHash('sha1').update(input).digest('hex').slice(0, 16);
    if (!this.valueBytes) return short;
    const [min, max] = this.valueBytes;
    const length = min + (parseInt(short.slice(0, 8), 16) % (max - min + 1));
    // base64url: four characters per three bytes of output (compressed, about three quarters of its size).
    return createHash('shake256', { outputLength: Math.ceil((length * 3) / 4) })
      .update(input)
      .digest('base64url')
      .slice(0, length);
  }

  /** Records entries the cluster acknowledged. */
  apply(entries: Iterable<ChaosEntry>, now = Date.now()): void {
    for (const e of entries) {
      if (this.counters?.holds(e.cf)) {
        this.counters.apply(e);
        continue;
      }
      const key = cellKey(e.row, e.cf, e.cq);
      let cell = this.cells.get(key);
      if (!cell) {
        cell = { row: e.row, cf: e.cf, cq: e.cq, maxDelete: -Infinity, puts: [] };
        this.cells.set(key, cell);
      }
      if (e.delete) {
        if (e.ts > cell.maxDelete) {
          cell.maxDelete = e.ts;
          const limit = e.ts;
          cell.puts = cell.puts.filter((t) => t > limit);
        }
      } else if (e.ts > cell.maxDelete && !this.agedOff(e.ts, now) && !cell.puts.includes(e.ts)) {
        cell.puts.push(e.ts);
        cell.puts.sort((a, b) => b - a);
        if (cell.puts.length > this.versions) cell.puts.length = this.versions;
      }
      if (cell.puts.length === 0 && cell.maxDelete === -Infinity) this.cells.delete(key);
    }
  }

  private agedOff(ts: number, now: number): boolean {
    return this.ttlMs !== undefined && ts < now - this.ttlMs;
  }

  /** A completed user compaction with `dropRowPrefix`: those rows are gone, deletes included. */
  dropRowPrefixes(prefixes: readonly string[]): void {
    for (const [key, c] of this.cells) if (prefixes.some((p) => c.row.startsWith(p))) this.cells.delete(key);
  }

  /** A completed user compaction with `dropFamily`. */
  dropFamilies(families: readonly string[]): void {
    for (const [key, c] of this.cells) if (families.includes(c.cf)) this.cells.delete(key);
  }

  /** The newest delete issued for a cell (the generator keeps puts above it). */
  maxDelete(row: string, cf: string, cq: string): number {
    return this.cells.get(cellKey(row, cf, cq))?.maxDelete ?? -Infinity;
  }

  /** Cells with a visible put (for overwrites and deletes). */
  liveCells(): { row: string; cf: string; cq: string }[] {
    return [...this.cells.values()].filter((c) => c.puts.length > 0);
  }

  get size(): number {
    return this.cells.size;
  }

  /**
   * Compares a full scan (in scan order) with what it must be. Cells `ignore` accepts are left out on
   * both sides (rows a running user compaction may or may not have dropped yet).
   */
  compare(
    scanned: readonly ScannedLine[],
    ignore: (row: string, cf: string) => boolean = () => false,
    now = Date.now(),
  ): Comparison {
    const expected = new Map<string, string>();
    for (const c of this.cells.values()) {
      if (ignore(c.row, c.cf)) continue;
      for (const ts of c.puts) {
        if (this.agedOff(ts, now)) continue;
        expected.set(`${cellKey(c.row, c.cf, c.cq)}@${ts}`, this.valueOf(c.row, c.cf, c.cq, ts));
      }
    }
    const result: Comparison = {
      expected: expected.size,
      scanned: scanned.length,
      lost: 0,
      resurrected: 0,
      wrong: 0,
      examples: [],
    };
    const note = (what: string, line: string): void => {
      if (result.examples.length < 20) result.examples.push(`${what}: ${line}`);
    };
    const seen = new Set<string>();
    const counted: ScannedLine[] = [];
    for (const s of scanned) {
      if (ignore(s.row, s.cf)) continue;
      if (this.counters?.holds(s.cf)) {
        counted.push(s);
        continue;
      }
      const key = `${cellKey(s.row, s.cf, s.cq)}@${s.ts}`;
      const line = `${s.row}/${s.cf}/${s.cq}@${s.ts}=${clip(s.value)}`;
      const want = expected.get(key);
      if (seen.has(key)) {
        result.wrong++;
        note('duplicate', line);
      } else if (want === s.value) {
        // as it must be
      } else if (want !== undefined) {
        result.wrong++;
        note(`wrong value (want ${clip(want)})`, line);
      } else if (s.value === this.valueOf(s.row, s.cf, s.cq, s.ts)) {
        result.resurrected++;
        note('resurrected', line);
      } else {
        result.wrong++;
        note('never written', line);
      }
      seen.add(key);
    }
    for (const [key, value] of expected) {
      if (seen.has(key)) continue;
      result.lost++;
      const [cell, ts] = key.split('@') as [string, string];
      note('lost', `${cell.split('\u0000').join('/')}@${ts}=${clip(value)}`);
    }
    this.counters?.compare(counted, result, note);
    return result;
  }
}

/** A value as the report shows it: large values by their start and length. */
function clip(value: string): string {
  return value.length <= 40 ? value : `${value.slice(0, 32)}… (${value.length} bytes)`;
}
