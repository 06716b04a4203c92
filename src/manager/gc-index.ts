/**
 * The collector's index of references: which files the tablets reference, kept by the mutations the
 * manager applies (followed-index.ts), so that a cycle answers "is this `~del` file still referenced?"
 * without reading every tablet (what it did every cycle before: at 100,000 tablets, seconds of the
 * manager's CPU each minute for a handful of replaced files).
 *
 * It keeps, for each reference-bearing cell of a tablet row (`file:`, `ecomp:`, `resume:`, `split:`,
 * `hold:`), the files it names — read by the same function as a full read (gc-plan.ts, tabletReferences)
 * — and a count per file. A cell that cannot be read (a malformed value) makes every cycle fail, as a
 * full read of it would, until the row is fixed.
 *
 * The collector checks it against a new snapshot at every sweep (gc.ts); a difference is a bug — logged
 * with the cells behind it, counted (`excompact_manager_gc_index_mismatches_total`), and repaired by
 * taking the rebuilt table.
 */
import type { MetaBackend } from '../meta/backend.js';
import { isTabletRow } from '../meta/keys.js';
import { HOLD_PREFIX } from '../meta/holds.js';
import { ECOMP_PREFIX, FILE_PREFIX, RESUME_PREFIX, SPLIT_PREFIX, parseTablet } from '../meta/tablet.js';
import { describeError } from '../errors.js';
import type { CommitQueue } from './commit-queue.js';
import { FollowedIndex, type CellTable } from './followed-index.js';
import { tabletReferences } from './gc-plan.js';

const REFERENCE_PREFIXES = [FILE_PREFIX, ECOMP_PREFIX, RESUME_PREFIX, SPLIT_PREFIX, HOLD_PREFIX];

const namesReferences = (col: string): boolean => REFERENCE_PREFIXES.some((p) => col.startsWith(p));

/** What one cell references: the files it names, and the output it is writing (a reservation's). */
interface CellRefs {
  files: readonly string[];
  writing?: string;
}

/** `file:<name>` names only itself: kept as null, not as an array per file. */
type Stored = CellRefs | null;

/** A set of names, counted: a name is in it while at least one cell adds it. */
class Counts {
  private readonly n = new Map<string, number>();
  get size(): number {
    return this.n.size;
  }
  has(name: string): boolean {
    return this.n.has(name);
  }
  count(name: string): number {
    return this.n.get(name) ?? 0;
  }
  add(name: string): void {
    this.n.set(name, (this.n.get(name) ?? 0) + 1);
  }
  remove(name: string): void {
    const left = (this.n.get(name) ?? 0) - 1;
    if (left > 0) this.n.set(name, left);
    else this.n.delete(name);
  }
  /** The names in one and not the other (at most `limit`), or the counts that differ. */
  differences(other: Counts, limit: number): string[] {
    const out: string[] = [];
    for (const [name, count] of this.n) {
      if (out.length >= limit) return out;
      if (other.n.get(name) !== count) out.push(name);
    }
    for (const name of other.n.keys()) {
      if (out.length >= limit) return out;
      if (!this.n.has(name)) out.push(name);
    }
    return out;
  }
}

/** The references of the tablet rows, as cells put and deleted (no I/O: {@link ReferenceIndex} feeds it). */
export class ReferenceTable implements CellTable<ReferenceTable> {
  private readonly rows = new Map<string, Map<string, Stored>>();
  readonly referenced = new Counts();
  readonly writing = new Counts();
  /** Cells that could not be read, `<row> <col>` → why. */
  readonly unreadable = new Map<string, string>();

  /** The number of tablet rows with a reference-bearing cell. */
  get tablets(): number {
    return this.rows.size;
  }

  put(row: string, col: string, value: string): void {
    if (!isTabletRow(row) || !namesReferences(col)) return;
    this.delete(row, col);
    let refs: Stored;
    try {
      refs = col.startsWith(FILE_PREFIX) ? null : cellRefs(row, col, value);
    } catch (err) {
      this.unreadable.set(`${row} ${col}`, describeError(err));
      return;
    }
    let cells = this.rows.get(row);
    if (!cells) this.rows.set(row, (cells = new Map<string, Stored>()));
    cells.set(col, refs);
    this.count(col, refs, 1);
  }

  delete(row: string, col: string): void {
    if (!isTabletRow(row) || !namesReferences(col)) return;
    this.unreadable.delete(`${row} ${col}`);
    const cells = this.rows.get(row);
    if (!cells || !cells.has(col)) return;
    this.count(col, cells.get(col)!, -1);
    cells.delete(col);
    if (cells.size === 0) this.rows.delete(row);
  }

  deleteRow(row: string): void {
    if (!isTabletRow(row)) return;
    for (const key of this.unreadable.keys()) if (key.startsWith(`${row} `)) this.unreadable.delete(key);
    const cells = this.rows.get(row);
    if (!cells) return;
    for (const [col, refs] of cells) this.count(col, refs, -1);
    this.rows.delete(row);
  }

  /** Where this and `other` differ (at most `limit` names), none when they are equal. */
  differences(other: ReferenceTable, limit = 20): string[] {
    return [
      ...this.referenced.differences(other.referenced, limit),
      ...this.writing.differences(other.writing, limit).map((w) => `writing ${w}`),
      ...[...this.unreadable.keys()].filter((k) => !other.unreadable.has(k)).map((k) => `unreadable ${k}`),
      ...[...other.unreadable.keys()].filter((k) => !this.unreadable.has(k)).map((k) => `unreadable ${k}`),
    ].slice(0, limit);
  }

  /** How many cells name `name`, and which (`<row> <col>`, a few): what a difference is explained by. */
  explain(name: string): { count: number; cells: string[] } {
    const cells: string[] = [];
    for (const [row, cols] of this.rows) {
      for (const [col, refs] of cols) {
        const names = refs === null ? [col.slice(FILE_PREFIX.length)] : [...refs.files, refs.writing];
        if (names.includes(name) && cells.length < 5) cells.push(`${row} ${col}`);
      }
    }
    return { count: this.referenced.count(name), cells };
  }

  private count(col: string, refs: Stored, by: 1 | -1): void {
    const change = (counts: Counts, name: string) => (by === 1 ? counts.add(name) : counts.remove(name));
    if (refs === null) return change(this.referenced, col.slice(FILE_PREFIX.length));
    for (const file of refs.files) change(this.referenced, file);
    if (refs.writing !== undefined) change(this.writing, refs.writing);
  }
}

/** The references of one cell, read as a full read of its tablet reads them. */
function cellRefs(row: string, col: string, value: string): CellRefs {
  const files: string[] = [];
  let writing: string | undefined;
  tabletReferences(parseTablet(row, new Map([[col, value]])), {
    referenced: (file) => files.push(file),
    writing: (output) => (writing = output),
  });
  return writing === undefined ? { files } : { files, writing };
}

/** What the collector's reference index found at its last check with a difference: each name, both ways. */
export interface ReferenceDifference {
  name: string;
  index: { count: number; cells: string[] };
  store: { count: number; cells: string[] };
}

/** The live index of references: a {@link ReferenceTable} kept by the commit queue (followed-index.ts). */
export class ReferenceIndex extends FollowedIndex<ReferenceTable> {
  /** What the last check that found a difference found. */
  lastDifferences: ReferenceDifference[] | undefined;

  /** `epoch`: the manager's, whose writes the index follows (followed-index.ts, Fenced). */
  constructor(store: MetaBackend, commits: CommitQueue, epoch?: number) {
    super(store, commits, () => new ReferenceTable(), {
      ...(epoch === undefined ? {} : { epoch }),
      onDifferences: (kept, rebuilt, names) => {
        this.lastDifferences = names.map((name) => ({
          name,
          index: kept.explain(name),
          store: rebuilt.explain(name),
        }));
      },
    });
  }

  /** Tablets with a reference, and files referenced, as of now. */
  get size(): { tablets: number; files: number } {
    return { tablets: this.table.tablets, files: this.table.referenced.size };
  }
}
