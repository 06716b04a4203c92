/**
 * The one path by which every change to a hosted tablet is applied (Hosting.change; the mutation itself is
 * built by tablet-change.ts): planned with the tablet as it will be, sent to the metadata store, and
 * applied to the in-memory copy once the store accepted it.
 *
 * A change whose outcome is unknown (the manager's answer was lost: a timeout, a connection cut after the
 * request went out) may or may not have been applied, and one refused because the tablet changed behind
 * its copy was decided from an out-of-date copy: either way the tablet is read back from the store
 * (hosting.ts) before anything else happens to it, and the caller hears OUTCOME_UNKNOWN.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { TabletMeta } from '../meta/tablet.js';
import type { Mutation, MutationResult } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import type { QueueResolver } from '../queue/resolver.js';
import type { HostedTablet } from './hosted-tablet.js';
import {
  buildChange,
  LOC_CONDITION,
  preview,
  VERSION_CONDITION,
  withUserStep,
  type TabletChange,
} from './tablet-change.js';
import { certainlyNotApplied } from './tablet-row.js';

/** What applying a change needs of the tablets' host (Hosting). */
export interface ApplyDeps {
  queues: QueueResolver;
  log: Logger;
  /** Sends mutations to the metadata store as this server (a fenced answer stops the server). */
  mutate(mutations: Mutation[]): Promise<MutationResult[]>;
  /** Reads a stale tablet back from the store; drops it when it is no longer ours. */
  resync(tablet: HostedTablet): Promise<void>;
  /** Stops serving a tablet locally. */
  drop(tablet: HostedTablet, reason: string): void;
  /** The jobs the tablet, in the given state, wants; throws when its table's settings cannot be read. */
  planFor(tablet: HostedTablet, meta: TabletMeta): Promise<PlannedJob[]>;
  /** Told after a change was applied to the tablet (its copy updated). */
  changed?(tablet: HostedTablet): void;
}

/**
 * Applies a change to a hosted tablet: call inside `tablet.mutex`. Adds the `loc` condition, and with
 * `replan` the queue-entry update computed from the tablet as it will be. Resolves true when applied,
 * false when one of the change's own conditions failed; a lost location drops the tablet and rejects
 * with NOT_SERVING; an unknown outcome reads the tablet back and rejects with OUTCOME_UNKNOWN (the
 * caller can look at the tablet to learn what happened).
 */
export async function applyChange(
  tablet: HostedTablet,
  change: TabletChange,
  deps: ApplyDeps,
): Promise<boolean> {
  if (tablet.stale) await deps.resync(tablet);
  if (tablet.state !== 'hosted') {
    throw new ExcError('NOT_SERVING', `tablet ${tablet.row} is not hosted here`, {
      details: { tablet: tablet.row },
    });
  }
  let jobs: PlannedJob[] | undefined;
  if (change.replan) change = withUserStep(tablet, change, Date.now());
  const previewed = change.replan ? preview(tablet, change) : undefined;
  if (previewed) {
    // Planned on the tablet as it will be, so the queue says what the tablet will want.
    try {
      jobs = await deps.planFor(tablet, previewed);
    } catch (err) {
      // Without the table's settings the queue entries cannot be planned; leave them as they are
      // (removing them would strand the tablet's work) and plan again soon.
      deps.log.warn(
        { tablet: tablet.row, err: describeError(err) },
        'could not plan: queue entries left as they are',
      );
      tablet.replanNeeded = true;
    }
  }
  const built = buildChange(tablet, change, jobs, (name) => deps.queues.byQueueName(name));
  if (built.empty) {
    // Nothing to write: a plan made here found the queue entries already right.
    if (built.queued) tablet.replanNeeded = false;
    return true;
  }
  let result: MutationResult | undefined;
  try {
    [result] = await deps.mutate([built.mutation]);
  } catch (err) {
    if (certainlyNotApplied(err)) throw err;
    await readBack(tablet, `outcome of a change unknown: ${describeError(err)}`, deps);
    throw new ExcError(
      'OUTCOME_UNKNOWN',
      `the metadata store did not confirm a change of ${tablet.row}: ${describeError(err)}`,
      { cause: err, details: { tablet: tablet.row } },
    );
  }
  if (!result) throw new ExcError('INTERNAL', 'no result for a mutation');
  if (!result.applied) {
    if (result.failed.index === LOC_CONDITION) {
      deps.drop(tablet, 'lost its location (reassigned)');
      throw new ExcError('NOT_SERVING', `tablet ${tablet.row} is no longer hosted here`, {
        details: { tablet: tablet.row },
      });
    }
    if (result.failed.index === VERSION_CONDITION) {
      // The copy is out of date: read it again, and let the caller decide anew (as after an unknown
      // outcome; this change was certainly not applied).
      await readBack(tablet, 'the tablet changed behind its copy', deps);
      throw new ExcError('OUTCOME_UNKNOWN', `tablet ${tablet.row} changed behind its copy; try again`, {
        details: { tablet: tablet.row },
      });
    }
    return false;
  }
  change.apply?.(tablet.meta);
  tablet.meta.version++;
  // Cleared only once the entries are written: if this change is refused, the old entries may be stale.
  if (built.queued) {
    tablet.meta.queued = built.queued;
    tablet.replanNeeded = false;
  }
  deps.changed?.(tablet);
  return true;
}

/** Marks the tablet's copy stale and reads it back now (a failure leaves it stale for the next use). */
async function readBack(tablet: HostedTablet, why: string, deps: ApplyDeps): Promise<void> {
  tablet.stale = true;
  deps.log.warn({ tablet: tablet.row, why }, 'reading the tablet back');
  await deps
    .resync(tablet)
    .catch((e: unknown) =>
      deps.log.warn({ tablet: tablet.row, err: describeError(e) }, 'could not read the tablet back yet'),
    );
}
