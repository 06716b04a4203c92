/**
 * What a tablet wants compacted now, from its metadata row and its table's settings: the one
 * implementation of "this tablet has work for these queues". The tablet server plans with it after every
 * change and at reservation time; the manager's consistency check (`excompact admin check`) and the test
 * invariants judge `~cq` entries against it — so they can never disagree about what work is.
 */
import { createHash } from 'node:crypto';
import type { TableConfig } from '../meta/table-config.js';
import { isParked, type TabletMeta } from '../meta/tablet.js';
import { plan, queueDemand, type PlannedJob } from './planner.js';
import type { QueueInfo } from './registry.js';

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
