/**
 * What a tablet wants compacted now, from its metadata row and its table's settings: the one
 * implementation of "this tablet has work for these queues". The tablet server plans with it after every
 * change and at reservation time; the manager's consistency check (`excompact admin check`) and the test
 * invariants judge `~cq` entries against it — so they can never disagree about what work is.
 */
import type { TableConfig } from '../meta/table-config.js';
import { failureKey, isParked, type TabletMeta } from '../meta/tablet.js';
import {
  FORCED_PRIORITY_BASE,
  MAX_FILE_COUNT_PRIORITY,
  plan,
  queueDemand,
  routeBySize,
  type PlanInput,
  type PlannedJob,
  type PlannerFile,
  USER_PRIORITY_BASE,
} from './planner.js';
import { isAbandonedSplit, userStep } from './selection.js';
import type { QueueInfo } from './registry.js';

/**
 * What a tablet (in the given state) wants compacted now. A user compaction whose job (its selected files)
 * failed too often is parked like any other job: it is not planned again until released, and system work
 * goes on over the files outside its selection.
 */
export function planTablet(meta: TabletMeta, config: TableConfig): PlannedJob[] {
  // Planned as the tablet will be once its pending user compactions are selected (the tablet server
  // writes that step with the change it plans; the check judges a tablet whose step is not written yet
  // the same way).
  // (Only planned with, never written: no deletion mark it makes is kept, so its time does not matter.)
  const step = userStep(meta, 0);
  if (step) {
    // On a copy: the step may drop a failure record too (planning changes nothing).
    meta = {
      ...meta,
      userCompactions: new Map(meta.userCompactions),
      failures: new Map(meta.failures),
      splits: new Map(meta.splits),
    };
    step.apply(meta);
  }
  const selection = meta.selection;
  const reserved = reservedFiles(meta);
  const parked = parkedFiles(meta, config.maxAttempts);
  const units = planUnits(meta, [reserved, parked, new Set(selection?.files ?? [])]);
  let user: PlanInput['user'];
  if (selection) {
    const failure = meta.failures.get(failureKey(selection.files));
    user = {
      ids: selection.ids,
      files: units.names(selection.files),
      filters: selection.filters,
      ...(selection.queue ? { queue: selection.queue } : {}),
      runnable: !(failure && isParked(failure, config.maxAttempts)),
    };
  }
  const jobs = plan({
    files: units.files,
    reserved: new Set(units.names(reserved)),
    parked: new Set(units.names(parked)),
    config,
    ...(user ? { user } : {}),
  }).map((job) => ({ ...job, files: units.expand(job.files) }));
  return [...splitJobs(meta, config), ...jobs];
}

/**
 * The sub-jobs of the tablet's split jobs that wait for a compactor: neither done nor reserved, and their
 * split neither parked nor abandoned (a user split whose requests were all cancelled). They come first
 * (their split holds its inputs out of every other job until its last sub-job commits), routed like the
 * whole job, with the priority of its kind (a user job's, or a forced job's).
 */
export function splitJobs(meta: TabletMeta, config: TableConfig): PlannedJob[] {
  const out: PlannedJob[] = [];
  for (const [id, s] of meta.splits) {
    const failure = meta.failures.get(failureKey(s.inputs));
    if (failure && isParked(failure, config.maxAttempts)) continue;
    if (isAbandonedSplit(meta, s)) continue;
    // A split whose inputs are not all the tablet's any more can never commit (a bug elsewhere): planning
    // its sub-jobs first would only block the queue's other work on this tablet.
    if (!s.inputs.every((f) => meta.files.has(f))) continue;
    const running = new Set<number>();
    for (const r of meta.reservations.values()) if (r.split?.id === id) running.add(r.split.index);
    const inputBytes = s.inputs.reduce((n, f) => n + (meta.files.get(f)?.size ?? 0), 0);
    s.done.forEach((done, index) => {
      if (done !== null || running.has(index)) return;
      out.push({
        kind: s.kind,
        files: s.inputs,
        inputBytes,
        queue:
          (s.kind === 'user' ? meta.selection?.queue : undefined) ?? routeBySize(config.queues, inputBytes),
        priority:
          (s.kind === 'user' ? USER_PRIORITY_BASE : FORCED_PRIORITY_BASE) +
          Math.min(meta.files.size, MAX_FILE_COUNT_PRIORITY),
        allFiles: s.allFiles,
        split: { id, index },
      });
    });
  }
  return out;
}

/**
 * The work a tablet has per existing queue: queue id → the priority its `~cq` entry should carry. Routes to
 * queues that do not exist (any more) are dropped: no entry can be written for them.
 */
export function tabletDemand(
  meta: TabletMeta,
  config: TableConfig,
  queues: readonly QueueInfo[],
): Map<string, number> {
  const byName = new Map(queues.map((q) => [q.name, q.id]));
  const demand = new Map<string, number>();
  for (const [name, priority] of queueDemand(planTablet(meta, config))) {
    const id = byName.get(name);
    if (id !== undefined) demand.set(id, priority);
  }
  return demand;
}

/**
 * The tablet's files as the planner weighs them. The outputs of one split job (files tagged with its
 * `group`) are disjoint row ranges of one compaction: they are one unit, of their total size, so that they
 * are never compacted again among themselves for being of equal sizes (which the ratio rule would do at
 * once, and forever). A group whose files are not all alike for the planner (some reserved, parked or
 * selected and some not) is weighed file by file.
 */
function planUnits(meta: TabletMeta, states: readonly ReadonlySet<string>[]) {
  const groups = new Map<string, string[]>();
  for (const [name, f] of meta.files) {
    if (f.group !== undefined) groups.set(f.group, [...(groups.get(f.group) ?? []), name]);
  }
  const unitOf = new Map<string, string>();
  const members = new Map<string, string[]>();
  for (const [group, names] of groups) {
    if (names.length < 2) continue;
    if (states.some((set) => names.some((n) => set.has(n) !== set.has(names[0]!)))) continue;
    // Not a path: no file name starts with NUL.
    const unit = `\0split:${group}`;
    members.set(unit, names);
    for (const n of names) unitOf.set(n, unit);
  }
  const files: PlannerFile[] = [];
  const sizes = new Map<string, number>();
  for (const [name, f] of meta.files) {
    const unit = unitOf.get(name);
    if (unit === undefined) files.push({ name, size: f.size });
    else sizes.set(unit, (sizes.get(unit) ?? 0) + f.size);
  }
  for (const [unit, size] of sizes) files.push({ name: unit, size });
  return {
    files,
    /** Unit names of these file names (each unit once). */
    names: (names: Iterable<string>): string[] => [...new Set([...names].map((n) => unitOf.get(n) ?? n))],
    /** File names of these unit names. */
    expand: (names: readonly string[]): string[] => names.flatMap((n) => members.get(n) ?? [n]),
  };
}

/**
 * Files in running reservations, in split jobs (held from their first sub-job to their last), and held
 * for a sibling's reservation (meta/holds.ts).
 */
function reservedFiles(meta: TabletMeta): Set<string> {
  const out = new Set<string>();
  for (const r of meta.reservations.values()) for (const f of r.inputs) out.add(f);
  for (const s of meta.splits.values()) for (const f of s.inputs) out.add(f);
  for (const h of meta.holds.values()) for (const f of h.inputs) out.add(f);
  return out;
}

/** Files of parked jobs, by the table's current `maxAttempts`: no system job takes any of them. */
export function parkedFiles(meta: TabletMeta, maxAttempts: number): Set<string> {
  const out = new Set<string>();
  for (const f of meta.failures.values()) {
    if (isParked(f, maxAttempts)) for (const name of f.inputs) out.add(name);
  }
  return out;
}
