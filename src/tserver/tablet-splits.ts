/**
 * Tablet splits on the tablet server: the I/O around tablet-split-rules.ts. A split is asked for by an
 * admin (`excompact admin table split`, through the manager) or happens by itself when a tablet's data
 * passes its table's `splitThreshold` (checked after every change of the tablet).
 *
 * The files' profiles (first and last row, each block's last row and bytes: storage/split-rows.ts) are
 * read before the tablet's mutex is taken, from a cache (files never change); in the mutex the rules
 * decide from the tablet as it is then, and the change is applied through hosting like any other. The
 * new daughters are hosted here at once: a request for one while the split is applied waits for it. When
 * the change's outcome is unknown, the tablet has been read back: the split happened if its previous end
 * row is the last split row, and the daughters are then loaded from the store.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Location } from '../meta/tablet.js';
import { fileProfile, type FileProfile, type ObjectStore } from '../storage/index.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import { decideTabletSplit, middleRow, usableSplitRows } from './tablet-split-rules.js';
import type { TableConfigs } from './table-configs.js';

export interface TabletSplitsDeps {
  hosting: Hosting;
  configs: TableConfigs;
  store: ObjectStore;
  me: Location;
  log: Logger;
}

/** Profiles kept (a few hundred bytes each, plus a row per block). */
const PROFILE_CACHE = 20_000;
/** After an automatic split failed, the tablet is not tried again for this long. */
const RETRY_AFTER_MS = 5_000;

export interface SplitAnswer {
  /** The tablet rows the split tablet's rows are in now, lowest first (just the tablet: nothing to do). */
  tablets: string[];
  split: boolean;
}

export class TabletSplits {
  private readonly profiles = new Map<string, FileProfile>();
  /** Tablets with an automatic split running, or failed lately (row → when it may be tried again). */
  private readonly busy = new Map<string, number>();
  readonly stats = { splits: 0, daughters: 0, failed: 0 };

  constructor(private readonly deps: TabletSplitsDeps) {}

  /**
   * Splits the hosted tablet `row` at `rows` (those not strictly inside it are left out: a row that is
   * already a split point is no error). NOT_SERVING when it is not hosted here.
   */
  async split(row: string, rows: Buffer[], why: 'admin' | 'threshold'): Promise<SplitAnswer> {
    const { hosting, log } = this.deps;
    const tablet = await hosting.get(row);
    await this.readProfiles(tablet);
    let finish = (): void => undefined;
    const created = new Promise<void>((resolve) => (finish = resolve));
    try {
      return await tablet.mutex.run(async () => {
        if (tablet.stale) await hosting.resync(tablet);
        if (tablet.state !== 'hosted') throw notHosted(row);
        if (tablet.closing)
          throw new ExcError('CONFLICT', `tablet ${row} is merging; split it afterwards`, {
            details: { tablet: row },
          });
        // An automatic split is decided again as the tablet and its settings are now (a compaction or a
        // change of the settings may have come while the profiles were read).
        if (why === 'threshold' && !this.overThreshold(tablet)) return { tablets: [row], split: false };
        const usable = usableSplitRows(tablet.meta, rows);
        if (usable.length === 0) return { tablets: [row], split: false };
        await this.readProfiles(tablet);
        const decision = decideTabletSplit(tablet.meta, usable, this.profiles, {
          me: this.deps.me,
          now: Date.now(),
        });
        const rowsNow = [...decision.daughters.map((d) => d.row), row];
        hosting.expect(
          decision.daughters.map((d) => d.row),
          created,
        );
        let applied: boolean;
        try {
          applied = await hosting.change(tablet, { ...decision.change, replan: true });
        } catch (err) {
          if (!(err instanceof ExcError && err.code === 'OUTCOME_UNKNOWN') || tablet.stale) throw err;
          // Read back: the split happened if the tablet's rows start at the last split row now.
          const last = usable[usable.length - 1]!;
          applied = tablet.meta.prevEndRow?.equals(last) === true;
          if (!applied) throw err;
          finish();
          for (const d of decision.daughters) await hosting.load(d.row);
          this.counted(decision.daughters.length, row, why);
          return { tablets: rowsNow, split: true };
        }
        if (!applied) {
          // The manager changed what it writes in the row (a user compaction asked or cancelled) since
          // the copy read it, or a daughter's row exists: read the requests again for the next attempt.
          await hosting.rereadRequests(tablet);
          throw new ExcError(
            'CONFLICT',
            `tablet ${row} changed while it split (a user compaction asked or cancelled): try again`,
            { details: { tablet: row } },
          );
        }
        const adopted = decision.daughters.map((d) => hosting.adopt(d));
        finish();
        this.counted(adopted.length, row, why);
        // Each daughter's queue entries, and the user compaction steps its requests call for.
        for (const d of adopted) void this.settle(d);
        return { tablets: rowsNow, split: true };
      });
    } catch (err) {
      log.warn({ tablet: row, err: describeError(err) }, 'tablet split failed');
      throw err;
    } finally {
      finish();
    }
  }

  /**
   * Splits `tablet` in two near the middle of its data when its files hold more of its rows than its
   * table's `splitThreshold`: soon, outside the caller (a change, inside the tablet's mutex).
   */
  maybeSplit(tablet: HostedTablet): void {
    const until = this.busy.get(tablet.row);
    if (until !== undefined && until > Date.now()) return;
    if (tablet.state !== 'hosted' || tablet.closing || !this.overThreshold(tablet)) return;
    this.busy.set(tablet.row, Infinity);
    setImmediate(() => {
      void this.splitInTwo(tablet).then(
        (split) => {
          if (split) this.busy.delete(tablet.row);
          else {
            // Its bytes are all in one row (or its files' indexes could not be read): tried again on
            // a change of the tablet, not before a while.
            this.busy.set(tablet.row, Date.now() + RETRY_AFTER_MS);
            this.deps.log.info({ tablet: tablet.row }, 'no row to split a tablet past its threshold at');
          }
        },
        (err: unknown) => {
          this.stats.failed++;
          this.busy.set(tablet.row, Date.now() + RETRY_AFTER_MS);
          this.deps.log.info({ tablet: tablet.row, err: describeError(err) }, 'automatic split postponed');
          // Tried again then even if nothing changes the tablet meanwhile (a quiet tablet still splits).
          setTimeout(() => this.maybeSplit(tablet), RETRY_AFTER_MS + 10).unref();
        },
      );
    });
  }

  /** False when there is no row to split at. */
  private async splitInTwo(tablet: HostedTablet): Promise<boolean> {
    if (tablet.state !== 'hosted') return true;
    // The check above used the settings last read, which may predate a change whose refresh request
    // did not arrive: decided again on settings at most a few seconds old.
    await this.deps.configs.get(tablet.meta.tableId).catch(() => undefined);
    if (!this.overThreshold(tablet)) return true;
    await this.readProfiles(tablet);
    const row = middleRow(
      tablet.meta,
      [...tablet.meta.files.keys()].flatMap((f) => this.profiles.get(f) ?? []),
    );
    if (!row) return false;
    await this.split(tablet.row, [row], 'threshold');
    return true;
  }

  /** Whether the tablet's files hold more than its table's `splitThreshold` (a table being deleted: no). */
  private overThreshold(tablet: HostedTablet): boolean {
    const settings = this.deps.configs.cached(tablet.meta.tableId);
    const bytes = [...tablet.meta.files.values()].reduce((n, f) => n + f.size, 0);
    return settings?.state === 'online' && bytes > settings.config.splitThreshold;
  }

  /** A daughter's first change: its queue entries and user compaction step, planned as on a load. */
  private async settle(tablet: HostedTablet): Promise<void> {
    const { hosting } = this.deps;
    await tablet.mutex
      .run(async () => {
        if (tablet.state === 'hosted') await hosting.change(tablet, { replan: true });
      })
      .catch((err: unknown) => {
        tablet.replanNeeded = true;
        this.deps.log.warn(
          { tablet: tablet.row, err: describeError(err) },
          'could not plan a new daughter yet',
        );
      });
  }

  private counted(daughters: number, row: string, why: string): void {
    this.stats.splits++;
    this.stats.daughters += daughters;
    this.deps.log.info({ tablet: row, daughters: daughters + 1, why }, 'tablet split');
  }

  /** Reads the profiles of the tablet's files not in the cache; a file that cannot be read has none. */
  private async readProfiles(tablet: HostedTablet): Promise<void> {
    const missing = [...tablet.meta.files.keys()].filter((f) => !this.profiles.has(f));
    await Promise.all(
      missing.map(async (name) => {
        try {
          const profile = await fileProfile(this.deps.store, name);
          if (this.profiles.size >= PROFILE_CACHE) {
            const oldest = this.profiles.keys().next().value;
            if (oldest !== undefined) this.profiles.delete(oldest);
          }
          this.profiles.set(name, profile);
        } catch (err) {
          this.deps.log.warn({ file: name, err: describeError(err) }, 'could not read a file index to split');
        }
      }),
    );
  }
}

function notHosted(row: string): ExcError {
  return new ExcError('NOT_SERVING', `tablet ${row} is not hosted here`, { details: { tablet: row } });
}
