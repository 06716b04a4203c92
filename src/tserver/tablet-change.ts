/**
 * A change to a hosted tablet as the metadata store receives it: the pure part of Hosting.change.
 *
 * Every change is decided from the tablet server's in-memory copy of the tablet, so the mutation carries,
 * before the change's own conditions:
 *   0. `loc` names this server and session (the fence: a server that lost its session changes nothing);
 *   1. `ver` is the version the copy was made at (a change of ours applied late — after the read-back that
 *      followed its lost answer — has bumped it: the copy is out of date, and nothing is decided from it);
 * and puts the next version. With `replan`, it also moves the tablet's queue entries to what the tablet
 * will want once the change is applied (planned on a preview of the copy with the change applied).
 */
import { COL_SELECTED, COL_VERSION, type TabletMeta } from '../meta/tablet.js';
import type { Cell, Condition, Mutation } from '../meta/types.js';
import { queueUpdate } from '../queue/entries.js';
import { queueDemand, type PlannedJob } from '../queue/planner.js';
import type { QueueInfo } from '../queue/registry.js';
import { userStep } from '../queue/selection.js';
import type { HostedTablet } from './hosted-tablet.js';

/** A change to a tablet: the mutation's parts, and what to do to the in-memory copy once it is applied. */
export interface TabletChange {
  conditions?: Condition[];
  puts?: Cell[];
  deletes?: { row: string; col: string }[];
  deleteRows?: string[];
  /** Applied to the in-memory tablet after the store accepted the change. */
  apply?: (meta: TabletMeta) => void;
  /** Re-plan the tablet's queue entries as part of this change, as if `apply` had run. */
  replan?: boolean;
}

/** Index of the fence conditions in every tablet mutation. */
export const LOC_CONDITION = 0;
export const VERSION_CONDITION = 1;

export interface BuiltChange {
  mutation: Required<Mutation>;
  /** The queue entries the tablet will have (when planned). */
  queued?: Map<string, string>;
  /** Whether there is anything to write beyond the version. */
  empty: boolean;
}

/**
 * The tablet as it will be once `change` is applied (the copy is not touched), without its ingest ids:
 * nothing decided from a preview (the plan, the user step) reads them, and a busy tablet remembers tens
 * of thousands, which every ingest copied. A change's apply adds and removes them on an empty map.
 */
export function preview(tablet: HostedTablet, change: TabletChange): TabletMeta {
  const meta = cloneMeta(tablet.meta);
  change.apply?.(meta);
  return meta;
}

/**
 * `change` with the tablet's user compactions moved on as it will leave them (selection.ts): pending
 * requests selected or joined, requests with nothing left to rewrite completed. A replanned change
 * carries this step, so the queue entries written with it describe the tablet as it will be. The step's
 * cell for the selection supersedes the change's own (it was computed on the tablet after the change).
 */
export function withUserStep(tablet: HostedTablet, change: TabletChange, now: number): TabletChange {
  const step = userStep(preview(tablet, change), now);
  if (!step) return change;
  const notSelection = (c: { col: string }) => c.col !== COL_SELECTED;
  const touchesSelection = [...step.puts, ...step.deletes].some((c) => !notSelection(c));
  // Likewise a cell the step deletes (a dropped split) is not also written: a mutation's puts would win.
  const deleted = new Set(step.deletes.map((d) => `${d.row}\0${d.col}`));
  const kept = (c: { row: string; col: string }) =>
    (!touchesSelection || notSelection(c)) && !deleted.has(`${c.row}\0${c.col}`);
  return {
    ...change,
    puts: [...(change.puts ?? []).filter(kept), ...step.puts],
    deletes: [...(change.deletes ?? []).filter((c) => !touchesSelection || notSelection(c)), ...step.deletes],
    apply: (m) => {
      change.apply?.(m);
      step.apply(m);
    },
  };
}

/**
 * The mutation for `change` of `tablet`; `jobs` is what the tablet will want (from {@link preview}), or
 * undefined when it is not replanned (or could not be planned: its queue entries are then left as they are).
 */
export function buildChange(
  tablet: HostedTablet,
  change: TabletChange,
  jobs: PlannedJob[] | undefined,
  queueOf: (name: string) => QueueInfo | undefined,
): BuiltChange {
  const { row, version } = tablet.meta;
  const mutation: BuiltChange['mutation'] = {
    conditions: [
      tablet.locCondition(),
      version === 0
        ? { op: 'absent', row, col: COL_VERSION }
        : { op: 'equals', row, col: COL_VERSION, value: String(version) },
      ...(change.conditions ?? []),
    ],
    puts: [...(change.puts ?? [])],
    deletes: [...(change.deletes ?? [])],
    deleteRows: [...(change.deleteRows ?? [])],
  };
  let queued: Map<string, string> | undefined;
  if (jobs) {
    const update = queueUpdate(tablet.meta, tablet.meta.queued, queueDemand(jobs), queueOf);
    mutation.puts.push(...update.puts);
    mutation.deletes.push(...update.deletes);
    mutation.deleteRows.push(...update.deleteRows);
    queued = update.queued;
  }
  const empty =
    mutation.puts.length === 0 && mutation.deletes.length === 0 && mutation.deleteRows.length === 0;
  mutation.puts.push({ row, col: COL_VERSION, value: String(version + 1) });
  return { mutation, ...(queued ? { queued } : {}), empty };
}

/** A copy of `meta` to apply a change to, but for its ingest ids (see {@link preview}). */
export function cloneMeta(meta: TabletMeta): TabletMeta {
  return {
    ...meta,
    files: new Map(meta.files),
    reservations: new Map(meta.reservations),
    userCompactions: new Map(meta.userCompactions),
    failures: new Map(meta.failures),
    resumes: new Map(meta.resumes),
    splits: new Map(meta.splits),
    holds: new Map(meta.holds),
    progress: new Map(meta.progress),
    queued: new Map(meta.queued),
    ingests: new Map(),
  };
}
