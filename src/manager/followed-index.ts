/**
 * An index over the tablet rows that follows the mutations the active manager applies, so that a view
 * which needs something of every tablet (which files are referenced, which tablets have work, how many
 * tablets each server hosts) answers without reading every tablet each time.
 *
 * Every metadata write goes through the active manager's commit queue, which tells its listeners each
 * batch's applied mutations in the order they committed (the writers apply batches one at a time). A
 * {@link CellTable} keeps what it needs of each cell; a mutation changes it as it changed the store: its
 * deletes, then its whole-row deletes, then its puts.
 *
 * Built from one snapshot of the store, opened while the commit queue is paused
 * ({@link CommitQueue.pause}): every batch committed before it has been reported, none commits until the
 * snapshot is pinned. So the snapshot holds exactly the batches reported before it; those reported while
 * it is read are replayed on it once read, and the new table replaces the old in the same turn as the
 * last replay (a batch reported in between would reach the old table and not the new one). Without the
 * pause, a batch the writer thread had committed but not yet answered would be in the snapshot and not in
 * the table kept: a check would count a difference that is none (a chaos run did).
 *
 * When it cannot be sure. A batch whose outcome the commit queue does not know (the store's answer lost:
 * OUTCOME_UNKNOWN; any failed batch counts) may have committed unseen: the table is built again from a
 * new snapshot before it is used.
 *
 * Checked. {@link FollowedIndex.verify} builds a second table the same way and compares the two at the
 * same point of the mutation stream: they must be equal, and a difference is a bug (the rebuilt table is
 * kept).
 *
 * Fenced. The table follows the writes of one manager epoch. A snapshot of a store that a newer epoch
 * holds has writes this manager never saw (a manager cut off from ZooKeeper, or paused, goes on running
 * until it learns it lost its term): such a build is refused with NOT_MANAGER, and nothing is compared.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { readEpoch, scanAll, type MetaBackend } from '../meta/backend.js';
import { ALL_TABLETS } from '../meta/keys.js';
import type { Mutation } from '../meta/types.js';
import type { CommitQueue } from './commit-queue.js';

/** What an index keeps of the cells of the tablet rows (no I/O: {@link FollowedIndex} feeds it). */
export interface CellTable<T> {
  put(row: string, col: string, value: string): void;
  delete(row: string, col: string): void;
  deleteRow(row: string): void;
  /** Where this and `other` differ (a few names), none when they are equal. */
  differences(other: T): string[];
}

/** Applies `m` to `table` as the store applies it. */
export function applyMutation(table: CellTable<unknown>, m: Mutation): void {
  for (const d of m.deletes ?? []) table.delete(d.row, d.col);
  for (const row of m.deleteRows ?? []) table.deleteRow(row);
  for (const p of m.puts ?? []) table.put(p.row, p.col, p.value);
}

export interface IndexStats {
  /** Times the table was built from a snapshot (at start, after an uncertain batch, at each check). */
  builds: number;
  /** Checks that found the table different from the store (a bug: see the module comment). */
  mismatches: number;
}

export interface FollowOptions<T> {
  /**
   * The manager epoch whose writes the table follows: a snapshot of the store held by another is refused
   * (NOT_MANAGER). None: not checked (a tool or test that owns the store alone).
   */
  epoch?: number;
  /** Told of a difference a check found, with both tables (before the rebuilt one is kept). */
  onDifferences?: (kept: T, rebuilt: T, differences: string[]) => void;
}

export class FollowedIndex<T extends CellTable<T>> {
  protected table: T;
  /** Settles once the table is complete (a build in flight, or none). */
  private building: Promise<void> = Promise.resolve();
  /** Whether a batch may have committed unseen since the last build began: build again before use. */
  private uncertain = true;
  private readonly unsubscribe: (() => void)[] = [];
  /** Builds in flight: each gets every batch applied while its snapshot is read, replayed after it. */
  private readonly builds = new Set<Mutation[]>();
  readonly stats: IndexStats = { builds: 0, mismatches: 0 };

  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly make: () => T,
    private readonly options: FollowOptions<T> = {},
  ) {
    this.table = make();
    this.unsubscribe.push(
      commits.onApplied(({ applied }) => {
        for (const m of applied) applyMutation(this.table, m);
        for (const pending of this.builds) for (const m of applied) pending.push(m);
      }),
      commits.onUncertain(() => (this.uncertain = true)),
    );
  }

  stop(): void {
    for (const off of this.unsubscribe) off();
  }

  /** The table, complete as of the last batch the commit queue reported (built again first if need be). */
  async current(): Promise<T> {
    for (;;) {
      const building = this.building;
      await building;
      // Another caller started a build meanwhile: wait for that one.
      if (building !== this.building) continue;
      if (!this.uncertain) return this.table;
      // Cleared before the snapshot begins: a batch uncertain while it is read sets it again.
      this.uncertain = false;
      const attempt = this.build((table) => {
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
    let differences: string[] = [];
    await this.build((rebuilt) => {
      differences = this.table.differences(rebuilt);
      if (differences.length > 0) this.options.onDifferences?.(this.table, rebuilt, differences);
      this.table = rebuilt;
    });
    if (differences.length > 0) this.stats.mismatches++;
    return differences;
  }

  /** Builds a table from a snapshot and hands it to `install` in the same turn as the last replay. */
  private async build(install: (table: T) => void): Promise<void> {
    const table = this.make();
    const during: Mutation[] = [];
    const resume = await this.commits.pause();
    // Every batch reported from here on commits after the snapshot is pinned.
    this.builds.add(during);
    try {
      await this.store.snapshot(async (reader) => {
        // The first read pins the snapshot (PostgreSQL takes it there; SQLite at its start).
        const held = await readEpoch(reader);
        resume();
        const { epoch } = this.options;
        if (epoch !== undefined && held !== epoch) {
          throw new ExcError(
            'NOT_MANAGER',
            `the metadata store is held by epoch ${held}, not ${epoch}: this manager no longer sees every write`,
            { details: { epoch, heldBy: held } },
          );
        }
        for await (const cell of scanAll(reader, { start: ALL_TABLETS.start, end: ALL_TABLETS.end })) {
          table.put(cell.row, cell.col, cell.value);
        }
      });
      for (const m of during) applyMutation(table, m);
      install(table);
      this.stats.builds++;
    } finally {
      resume();
      this.builds.delete(during);
    }
  }
}

/**
 * Logs what a check of the index called `name` found ({@link FollowedIndex.verify}'s answer): nothing
 * when it was just built, `<name> checked against the store`, or an error with the differences (a bug;
 * the store's table is kept). `fields` go with either line. The chaos run counts both lines.
 */
export function logCheck(
  log: Logger,
  name: string,
  differences: readonly unknown[] | undefined,
  fields: Record<string, unknown> = {},
): void {
  if (differences === undefined) return;
  if (differences.length === 0) log.info({ index: name, ...fields }, `${name} checked against the store`);
  else {
    log.error(
      { index: name, differences, ...fields },
      `the ${name} differed from the metadata store; using the store as read now`,
    );
  }
}

/** Checks `index` against the store every `everyMs`, logged by {@link logCheck}. Returns what stops it. */
export function checkEvery<T extends CellTable<T>>(
  index: FollowedIndex<T>,
  name: string,
  everyMs: number,
  log: Logger,
): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    index
      .verify()
      .then(
        (differences) => logCheck(log, name, differences),
        (err: unknown) => log.info({ index: name, err: describeError(err) }, `${name} not checked`),
      )
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
