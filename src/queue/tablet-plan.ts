/**
 * What a tablet wants compacted now, from its metadata row and its table's settings: the one
 * implementation of "this tablet has work for these queues". The tablet server plans with it after every
 * change and at reservation time; the manager's consistency check (`excompact admin check`) and the test
 * invariants judge `~cq` entries against it — so they can never disagree about what work is.
 */
import type { TableConfig } from '../meta/table-config.js';
import { failureKey, isParked, type TabletMeta } from '../meta/tablet.js';
import { plan, queueDemand, type PlanInput, type PlannedJob } from './planner.js';
import { userStep } from './selection.js';
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
  const step = userStep(meta);
  if (step) {
    meta = { ...meta, userCompactions: new Map(meta.userCompactions) };
    step.apply(meta);
  }
  const files = [...meta.files].map(([name, f]) => ({ name, size: f.size }));
  const selection = meta.selection;
  let user: PlanInput['user'];
  if (selection) {
    const failure = meta.failures.get(failureKey(selection.files));
    user = {
      ids: selection.ids,
      files: selection.files,
      filters: selection.filters,
      runnable: !(failure && isParked(failure, config.maxAttempts)),
    };
  }
  return plan({
    files,
    reserved: reservedFiles(meta),
    parked: parkedFiles(meta, config.maxAttempts),
    config,
    ...(user ? { user } : {}),
  });
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
