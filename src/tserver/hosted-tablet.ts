/**
 * A tablet hosted by this tablet server: its metadata as of the last mutation this server applied, and a
 * mutex that serialises every change to it.
 *
 * Because every change to a hosted tablet goes through this server (all its mutations are conditional on
 * `loc` naming this server and session), the in-memory copy is exact: changes are computed from it and
 * applied to it once the metadata store has accepted them. When the outcome of a change is unknown (its
 * answer was lost), the copy is marked `stale` and read again from the store before anything else is done
 * with the tablet.
 */
import { Mutex } from '../mutex.js';
import { COL_LOC, locationValue, type Location, type Progress, type TabletMeta } from '../meta/tablet.js';
import type { Condition } from '../meta/types.js';

// Planning lives in src/queue (the manager's consistency check shares it); re-exported for this process.
export { failureKey } from '../meta/tablet.js';
export { planTablet } from '../queue/tablet-plan.js';

export type TabletState = 'hosted' | 'gone';

/** A compactor's progress report: its figures so far. */
export type ProgressFigures = Omit<Progress, 'at'>;

export class HostedTablet {
  readonly mutex = new Mutex();
  state: TabletState = 'hosted';
  /**
   * Per reservation, the figures its compactor last reported and when they last moved (in memory; the store
   * gets them at most every few seconds, see `meta.progress`). The clock starts when the reservation is
   * made or found.
   */
  readonly reported = new Map<string, { movedAt: number; figures?: ProgressFigures }>();
  /** The in-memory copy may differ from the store (a change's outcome was unknown): read it again first. */
  stale = false;
  /** Its queue entries could not be planned (table settings unavailable): plan again soon. */
  replanNeeded = false;
  /**
   * Being merged (tablet-merges.ts): it plans no job and makes no reservation, so that the compactions
   * running on it can end before it merges.
   */
  closing = false;

  /** The newest timestamp this server gave a batch of the tablet's (the tablet's time when loaded). */
  private clock: number;
  /** The stamps of batches being ingested: drawn, neither applied nor failed yet (see mayDropDeletes). */
  private readonly inFlight = new Set<number>();
  /** Until when an import waits for compactions that drop delete markers (import-rules.ts). */
  private deletesHeldUntil = 0;

  constructor(
    public meta: TabletMeta,
    readonly me: Location,
  ) {
    this.clock = meta.time;
  }

  /**
   * The timestamp for a batch ingested now: the wall clock, but after every batch stamped before, here or
   * on the tablet's earlier hosts (its time), so that a batch acknowledged after another always wins over
   * it: an overwrite shows, and a delete never hides what comes after it. More than one batch a
   * millisecond runs the clock ahead of the wall; it catches up as the load drops.
   */
  nextTimestamp(now = Date.now()): number {
    this.clock = Math.max(now, this.clock + 1, this.meta.time + 1);
    return this.clock;
  }

  /**
   * Stamps a batch about to be written (nextTimestamp) and counts it in flight until `settle` is called:
   * once the batch was applied, or failed. Stamps are unique (the clock only goes up).
   */
  startIngest(now = Date.now()): { ts: number; settle: () => void } {
    const ts = this.nextTimestamp(now);
    this.inFlight.add(ts);
    return { ts, settle: () => this.inFlight.delete(ts) };
  }

  /**
   * Whether a compaction of all the tablet's files reserved now may drop its delete markers (DESIGN.md
   * invariants 1 and 6). A batch is stamped before its file is written and applied later, in the mutex;
   * so a batch stamped before a delete can be applied after it, and the delete hides it. A compaction
   * that dropped the marker meanwhile would let it show again (it is not one of its inputs). The tablet's
   * time is at least every stamp applied, and a batch stamped after it was stamped after every marker
   * applied: only a batch in flight with a stamp at or below it may be hidden by one. Ask in the mutex,
   * with the copy up to date. (Stamping in the mutex instead would put every batch's file write there.)
   */
  mayDropDeletes(now = Date.now()): boolean {
    if (now < this.deletesHeldUntil) return false;
    for (const ts of this.inFlight) if (ts <= this.meta.time) return false;
    return true;
  }

  /**
   * An import waits for the compactions that drop delete markers (import-rules.ts): none more is reserved
   * for `ms`, which the import's next try (within it) extends.
   */
  holdDeletes(ms: number, now = Date.now()): void {
    this.deletesHeldUntil = Math.max(this.deletesHeldUntil, now + ms);
  }

  /** Starts the progress clock of a reservation made or found now. */
  startProgressClock(ecid: string): void {
    this.reported.set(ecid, { movedAt: Date.now() });
  }

  /** Forgets the in-memory progress of a reservation that ended. */
  forgetProgress(ecid: string): void {
    this.reported.delete(ecid);
  }

  get row(): string {
    return this.meta.row;
  }

  /** The condition every mutation of this tablet carries. */
  locCondition(): Condition {
    return { op: 'equals', row: this.meta.row, col: COL_LOC, value: locationValue(this.me) };
  }
}
