/**
 * Selection: which compactions a tablet wants now (DESIGN.md, "The life of a compaction", step 1).
 *
 * Pure logic over the tablet's files, run by the tablet server after every change to them and again at
 * reservation time (late binding). Rules, in order:
 *
 * 1. A user compaction's selection (selection.ts) is one job over exactly its files, with the requests'
 *    filters, once none of them is reserved. Its files are never selected for a system job.
 * 2. System compactions, over the files that are neither reserved, parked nor selected, smallest first:
 *    - logarithmic size ratio: the largest set of the smallest files (2 ≤ n ≤ maxFiles) whose total size is
 *      at least `ratio` × its largest file;
 *    - file limit: when the tablet has more than `fileLimit` files and the ratio finds nothing, the
 *      smallest files (up to maxFiles) are compacted regardless.
 *    Several disjoint jobs may be selected at once; each is routed to a queue by its total input size.
 *
 * Priorities (higher runs first): user > forced by the file limit > ratio; within each, more files in the
 * tablet means higher.
 */
import type { QueueRoute } from '../meta/table-config.js';

export interface PlannerFile {
  name: string;
  size: number;
}

export interface PlannerConfig {
  ratio: number;
  maxFiles: number;
  fileLimit: number;
  queues: QueueRoute[];
}

export interface PlanInput {
  /** Every file of the tablet. */
  files: readonly PlannerFile[];
  /** Files in running reservations. */
  reserved: ReadonlySet<string>;
  /** Files of parked (poison) jobs: never selected for a system job. */
  parked: ReadonlySet<string>;
  config: PlannerConfig;
  /** The user compaction under way (its selection), if any. */
  user?: {
    ids: readonly string[];
    files: readonly string[];
    filters: UserFilter[];
    /** The queue it asked for (absent: routed by size like any job). */
    queue?: string;
    /** False when its job is parked: its files stay out of system jobs, and it is not planned. */
    runnable: boolean;
  };
}

export interface UserFilter {
  name: string;
  options?: unknown;
}

export type JobKind = 'system' | 'user';

export interface PlannedJob {
  kind: JobKind;
  files: string[];
  inputBytes: number;
  /** The queue (name) the job routes to; undefined when the table routes no job of this size. */
  queue: string | undefined;
  priority: number;
  /** All of the tablet's files: delete markers may be dropped. */
  allFiles: boolean;
  /** For a user job: the requests it satisfies and their filters. */
  userCompactionIds?: string[];
  filters?: UserFilter[];
  /** A sub-job of a split job waiting for a compactor: its split's id and its index there. */
  split?: { id: string; index: number };
}

export const USER_PRIORITY_BASE = 0x4000_0000;
export const FORCED_PRIORITY_BASE = 0x2000_0000;
export const MAX_FILE_COUNT_PRIORITY = 0x0fff_ffff;

export function plan(input: PlanInput): PlannedJob[] {
  const { files, reserved, config, user } = input;
  const jobs: PlannedJob[] = [];
  const selected = new Set(user?.files ?? []);
  if (user?.runnable && user.files.length > 0 && !user.files.some((f) => reserved.has(f))) {
    const chosen = files.filter((f) => selected.has(f.name));
    // A selected file the tablet no longer has would be a bug elsewhere: rewrite nothing rather than part.
    if (chosen.length === user.files.length)
      jobs.push({
        ...job(
          'user',
          chosen,
          files.length,
          config,
          USER_PRIORITY_BASE + Math.min(files.length, MAX_FILE_COUNT_PRIORITY),
        ),
        ...(user.queue ? { queue: user.queue } : {}),
        userCompactionIds: [...user.ids],
        filters: user.filters,
      });
  }

  let candidates = files
    .filter((f) => !reserved.has(f.name) && !input.parked.has(f.name) && !selected.has(f.name))
    .sort((a, b) => a.size - b.size || (a.name < b.name ? -1 : 1));
  // The tablet's file count as it will be once the jobs selected so far are done.
  let projected = files.length;
  for (;;) {
    let chosen = ratioSelect(candidates, config.ratio, config.maxFiles);
    let forced = false;
    if (!chosen && projected > config.fileLimit && candidates.length >= 2) {
      chosen = candidates.slice(0, Math.min(config.maxFiles, candidates.length));
      forced = true;
    }
    if (!chosen) break;
    const count = Math.min(files.length, MAX_FILE_COUNT_PRIORITY);
    jobs.push(job('system', chosen, files.length, config, (forced ? FORCED_PRIORITY_BASE : 0) + count));
    const taken = new Set(chosen.map((f) => f.name));
    candidates = candidates.filter((f) => !taken.has(f.name));
    projected -= chosen.length - 1;
  }
  return jobs;
}

/** The largest prefix (2..maxFiles files) of the size-sorted candidates that satisfies the ratio. */
function ratioSelect(
  sorted: readonly PlannerFile[],
  ratio: number,
  maxFiles: number,
): PlannerFile[] | undefined {
  let sum = 0;
  let best = 0;
  const limit = Math.min(sorted.length, maxFiles);
  for (let i = 0; i < limit; i++) {
    const size = sorted[i]!.size;
    sum += size;
    if (i >= 1 && sum >= ratio * size) best = i + 1;
  }
  return best >= 2 ? sorted.slice(0, best) : undefined;
}

function job(
  kind: JobKind,
  chosen: readonly PlannerFile[],
  tabletFiles: number,
  config: PlannerConfig,
  priority: number,
): PlannedJob {
  const inputBytes = chosen.reduce((sum, f) => sum + f.size, 0);
  return {
    kind,
    files: chosen.map((f) => f.name),
    inputBytes,
    queue: routeBySize(config.queues, inputBytes),
    priority,
    allFiles: chosen.length === tabletFiles,
  };
}

/** The first route whose limit the job fits; the last route may be unbounded. */
export function routeBySize(routes: readonly QueueRoute[], inputBytes: number): string | undefined {
  return routes.find((r) => r.maxInputBytes === undefined || inputBytes <= r.maxInputBytes)?.queue;
}

/**
 * The work a tablet advertises per queue: for each queue, the highest priority among the jobs routed to
 * it. This is what the tablet's `~cq` entries say.
 */
export function queueDemand(jobs: readonly PlannedJob[]): Map<string, number> {
  const demand = new Map<string, number>();
  for (const j of jobs) {
    if (j.queue === undefined) continue;
    demand.set(j.queue, Math.max(demand.get(j.queue) ?? 0, j.priority));
  }
  return demand;
}
