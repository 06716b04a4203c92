/**
 * The collector's index of references: which files the tablets reference, kept by the mutations the
 * manager applies, so that a cycle answers "is this `~del` file still referenced?" without reading every
 * tablet (what it did every cycle before: at 100,000 tablets, seconds of the manager's CPU each minute
 * for a handful of replaced files).
 *
 * Every metadata write goes through the active manager's commit queue, which tells its listeners each
 * batch's applied mutations in the order they committed (the writers apply batches one at a time). The
 * index keeps, for each reference-bearing cell of a tablet row (`file:`, `ecomp:`, `resume:`, `split:`,
 * `hold:`), the files it names — read by the same function as a full read (gc-plan.ts, tabletReferences)
 * — and a count per file. A mutation changes it as it changed the store: its deletes, then its whole-row
 * deletes, then its puts.
 *
 * Built from one snapshot of the store. It listens before the snapshot begins and replays, once the
 * snapshot is read, every mutation that committed meanwhile: each put or delete sets a cell absolutely,
 * so a mutation the snapshot already holds, applied again, changes nothing, and every later one is there.
 *
 * When it cannot be sure. A batch whose outcome the commit queue does not know (the store's answer lost:
 * OUTCOME_UNKNOWN; any failed batch counts) may have committed unseen: the index is rebuilt from a new
 * snapshot, and the collector waits for it. A cell that cannot be read (a malformed value) makes every
 * cycle fail, as a full read of it would, until the row is fixed.
 *
 * Checked. {@link verify} builds a second index from a new snapshot the same way and compares the two at
 * the same point of the mutation stream: they must be equal. The collector does that at every sweep
 * (gc.ts); a difference is a bug — logged, counted (`excompact_manager_gc_index_mismatches_total`), and repaired by
 * taking the rebuilt index.
 */
import { scanAll, type MetaBackend } from '../meta/backend.js';
import { ALL_TABLETS } from '../meta/keys.js';
import { HOLD_PREFIX } from '../meta/holds.js';
import { ECOMP_PREFIX, FILE_PREFIX, RESUME_PREFIX, SPLIT_PREFIX, parseTablet } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import { describeError } from '../errors.js';
import type { CommitQueue } from './commit-queue.js';
import { tabletReferences } from './gc-plan.js';

const REFERENCE_PREFIXES = [FILE_PREFIX, ECOMP_PREFIX, RESUME_PREFIX, SPLIT_PREFIX, HOLD_PREFIX];

const isTabletRow = (row: string): boolean => row >= ALL_TABLETS.start && row < ALL_TABLETS.end;
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
export class ReferenceTable {
  private readonly rows = new Map<string, Map<string, Stored>>();
  readonly referenced = new Counts();
  readonly writing = new Counts();
  /** Cells that could not be read, `<row> <col>` → why. */
  readonly unreadable = new Map<string, string>();

  /** The number of tablet rows with a reference-bearing cell. */
  get tablets(): number {
    return this.rows.size;
  }

  apply(m: Mutation): void {
    for (const d of m.deletes ?? []) this.delete(d.row, d.col);
    for (const row of m.deleteRows ?? []) this.deleteRow(row);
    for (const p of m.puts ?? []) this.put(p.row, p.col, p.value);
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

export interface IndexStats {
  /** Times the index was built from a snapshot (at start, after an uncertain batch, at each check). */
  builds: number;
  /** Checks that found the index different from the store (a bug: see the module comment). */
  mismatches: number;
}

/** The live index: a {@link ReferenceTable} fed by the commit queue, built and rebuilt from snapshots. */
export class ReferenceIndex {
  private table = new ReferenceTable();
  /** Settles once the table is complete (a build in flight, or none). */
  private building: Promise<void> = Promise.resolve();
  /** Whether a batch may have committed unseen since the last build began: build again before use. */
  private uncertain = true;
  private readonly unsubscribe: (() => void)[] = [];
  /** Tables being built: each gets every batch applied while its snapshot is read, replayed after it. */
  private readonly builds = new Set<Mutation[]>();
  readonly stats: IndexStats = { builds: 0, mismatches: 0 };

  constructor(
    private readonly store: MetaBackend,
    commits: CommitQueue,
  ) {
    this.unsubscribe.push(
      commits.onApplied(({ applied }) => {
        for (const m of applied) this.table.apply(m);
        for (const pending of this.builds) pending.push(...applied);
      }),
      commits.onUncertain(() => (this.uncertain = true)),
    );
  }

  /** Tablets with a reference, and files referenced, as of now. */
  get size(): { tablets: number; files: number } {
    return { tablets: this.table.tablets, files: this.table.referenced.size };
  }

  stop(): void {
    for (const off of this.unsubscribe) off();
  }

  /** The table, complete as of the last batch the commit queue reported (built again first if need be). */
  async current(): Promise<ReferenceTable> {
    for (;;) {
      const building = this.building;
      await building;
      // Another caller started a build meanwhile: wait for that one.
      if (building !== this.building) continue;
      if (!this.uncertain) return this.table;
      // Cleared before the snapshot begins: a batch uncertain while it is read sets it again.
      this.uncertain = false;
      const attempt = this.build().then((table) => {
        this.table = table;
      });
      this.building = attempt.catch(() => {
        this.uncertain = true;
      });
      await attempt;
    }
  }

  /**
   * Builds the table again from the store and compares it with the one kept: the differences (none when
   * the index is right). The rebuilt table is kept either way. Undefined when there was nothing to
   * compare (no table yet, or one a lost answer left uncertain): the table is just built.
   */
  async verify(): Promise<string[] | undefined> {
    if (this.uncertain) {
      await this.current();
      return undefined;
    }
    await this.current();
    const rebuilt = await this.build();
    // Both have applied every batch reported so far: compared now, in one turn, they must be equal.
    const differences = this.table.differences(rebuilt);
    if (differences.length > 0) this.stats.mismatches++;
    this.table = rebuilt;
    return differences;
  }

  private async build(): Promise<ReferenceTable> {
    const table = new ReferenceTable();
    const during: Mutation[] = [];
    // Listening first: every batch that commits once the snapshot is taken is in `during`.
    this.builds.add(during);
    try {
      await this.store.snapshot(async (reader) => {
        for await (const cell of scanAll(reader, { start: ALL_TABLETS.start, end: ALL_TABLETS.end })) {
          table.put(cell.row, cell.col, cell.value);
        }
      });
      for (const m of during) table.apply(m);
      this.stats.builds++;
      return table;
    } finally {
      this.builds.delete(during);
    }
  }
}
