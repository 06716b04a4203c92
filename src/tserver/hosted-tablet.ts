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
import { createHash } from 'node:crypto';
import { Mutex } from '../mutex.js';
import {
  COL_LOC,
  isParked,
  locationValue,
  type Location,
  type Progress,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Condition } from '../meta/types.js';
import type { TableConfig } from '../meta/table-config.js';
import { plan, type PlannedJob } from '../queue/planner.js';

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

  constructor(
    public meta: TabletMeta,
    readonly me: Location,
  ) {}

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

/**
 * What a tablet (in the given state) wants compacted now. A user compaction whose job (all the files)
 * failed too often is parked like any other job: it is not planned again until released, and system work
 * goes on.
 */
export function planTablet(meta: TabletMeta, config: TableConfig): PlannedJob[] {
  const files = [...meta.files].map(([name, f]) => ({ name, size: f.size }));
  let userCompactionId = pendingUserCompaction(meta);
  if (userCompactionId !== undefined) {
    const failure = meta.failures.get(failureKey(files.map((f) => f.name)));
    if (failure && isParked(failure, config.maxAttempts)) userCompactionId = undefined;
  }
  return plan({
    files,
    reserved: reservedFiles(meta),
    parked: parkedFiles(meta, config.maxAttempts),
    config,
    ...(userCompactionId === undefined ? {} : { userCompactionId }),
  });
}

/** Files in running reservations. */
function reservedFiles(meta: TabletMeta): Set<string> {
  const out = new Set<string>();
  for (const r of meta.reservations.values()) for (const f of r.inputs) out.add(f);
  return out;
}

/** Files of parked jobs, by the table's current `maxAttempts`. */
function parkedFiles(meta: TabletMeta, maxAttempts: number): Set<string> {
  const out = new Set<string>();
  for (const f of meta.failures.values()) {
    if (isParked(f, maxAttempts)) for (const name of f.inputs) out.add(name);
  }
  return out;
}

/** The oldest pending user compaction. */
function pendingUserCompaction(meta: TabletMeta): string | undefined {
  let oldest: [string, number] | undefined;
  for (const [id, c] of meta.userCompactions) {
    if (!oldest || c.requestedAt < oldest[1]) oldest = [id, c.requestedAt];
  }
  return oldest?.[0];
}

/** Failures are recorded per set of input files. */
export function failureKey(inputs: readonly string[]): string {
  return createHash('sha256')
    .update([...inputs].sort().join('\n'))
    .digest('hex')
    .slice(0, 24);
}
