/**
 * What the chaos run reads from the processes' logs: how each reservation ended, what large and split
 * jobs went through, and what the tablets' shapes went through (splits, merges, moves, holds).
 */
import { createReadStream, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** What the processes' logs say about each reservation. */
export interface LogFindings {
  reserved: Set<string>;
  /** End records per ecid in the tablet servers' logs. */
  ends: Map<string, number>;
  /** Reservations a compactor logged as committed. */
  compactorCommitted: Set<string>;
  /** Large and split jobs, and what the faults did to them. */
  jobs: JobFigures;
  /** What the tablets' shapes went through. */
  elastic: ElasticFigures;
  /** The collector's reference index, checked against the store at every sweep (manager logs). */
  referenceIndex: { checks: number; mismatches: number };
  /** The manager's index of activity (busy tablets, hosts), checked as often (manager logs). */
  activityIndex: { checks: number; mismatches: number };
}

/** Splits, merges and moves, from the tablet servers' and managers' logs. */
export interface ElasticFigures {
  /** Tablet splits (by an admin, or by the split threshold). */
  splits: number;
  thresholdSplits: number;
  /** Tablet merges, and the compactions they cancelled when their wait was over. */
  merges: number;
  mergeCancelled: number;
  /** Compactions cancelled because their table was taken offline. */
  offlineCancelled: number;
  /** Tablets moved by the manager (balancing, drains, merges gathering their tablets). */
  moves: number;
  /** Holds settled: a compaction's output installed in a daughter, or let go. */
  holdsInstalled: number;
  holdsReleased: number;
}

/** What the tablet servers' logs tell of checkpointed and split jobs. */
export interface JobFigures {
  /** Checkpoints recorded in reservations. */
  checkpointsRecorded: number;
  /** Reservations cancelled with their checkpoint kept for the next attempt (a compactor died mid-job). */
  checkpointsKept: number;
  /** Reservations that went on from a kept checkpoint. */
  resumed: number;
  /** Split jobs started (of them, user compactions' jobs), and their sub-jobs reserved. */
  splitJobs: number;
  userSplitJobs: number;
  subJobsReserved: number;
  /** Sub-jobs cancelled (their compactor killed, paused, cut off…) and run again. */
  subJobsCancelled: number;
}

export async function readLogs(dir: string): Promise<LogFindings> {
  const jobs: JobFigures = {
    checkpointsRecorded: 0,
    checkpointsKept: 0,
    resumed: 0,
    splitJobs: 0,
    userSplitJobs: 0,
    subJobsReserved: 0,
    subJobsCancelled: 0,
  };
  const elastic: ElasticFigures = {
    splits: 0,
    thresholdSplits: 0,
    merges: 0,
    mergeCancelled: 0,
    offlineCancelled: 0,
    moves: 0,
    holdsInstalled: 0,
    holdsReleased: 0,
  };
  const found: LogFindings = {
    reserved: new Set(),
    ends: new Map(),
    compactorCommitted: new Set(),
    jobs,
    elastic,
    referenceIndex: { checks: 0, mismatches: 0 },
    activityIndex: { checks: 0, mismatches: 0 },
  };
  const splits = new Set<string>();
  const userSplits = new Set<string>();
  const subJobs = new Set<string>();
  const cancelled: string[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.log'))) {
    const tserver = file.includes('tserver');
    const compactor = file.includes('compactor');
    const manager = file.includes('manager');
    if (!tserver && !compactor && !manager) continue;
    const lines = createInterface({ input: createReadStream(join(dir, file)) });
    for await (const raw of lines) {
      if (manager) {
        if (raw.includes('"tablet moving"')) elastic.moves++;
        // The lines of followed-index.ts, logCheck.
        for (const [name, ix] of [
          ['reference index', found.referenceIndex],
          ['activity index', found.activityIndex],
        ] as const) {
          if (raw.includes(`"msg":"${name} checked against the store"`)) ix.checks++;
          if (raw.includes(`"msg":"the ${name} differed from the metadata store`)) {
            ix.checks++;
            ix.mismatches++;
          }
        }
        continue;
      }
      if (tserver && raw.includes('"msg":"tablet')) {
        if (raw.includes('"msg":"tablet split"')) {
          elastic.splits++;
          if (raw.includes('"why":"threshold"')) elastic.thresholdSplits++;
        } else if (raw.includes('"msg":"tablets merged"')) elastic.merges++;
      }
      if (tserver && raw.includes('"msg":"held compaction installed"')) elastic.holdsInstalled++;
      if (tserver && raw.includes('"msg":"hold let go"')) elastic.holdsReleased++;
      if (tserver && raw.includes('"msg":"reservation cancelled"') && raw.includes('"reason":"merge"'))
        elastic.mergeCancelled++;
      if (
        tserver &&
        raw.includes('"msg":"reservation cancelled"') &&
        raw.includes('"reason":"table-offline"')
      )
        elastic.offlineCancelled++;
      if (!raw.includes('"ecid"')) continue;
      let l: {
        msg?: string;
        ecid?: string;
        kind?: string;
        split?: string;
        resumedFrom?: string;
        keptCheckpoint?: boolean;
      };
      try {
        l = JSON.parse(raw) as typeof l;
      } catch {
        continue;
      }
      if (!l.ecid) continue;
      if (tserver && l.msg === 'reserved') {
        found.reserved.add(l.ecid);
        if (l.resumedFrom) jobs.resumed++;
        if (l.split) splits.add(l.split);
        if (l.split && l.kind === 'user') userSplits.add(l.split);
        if (l.split) subJobs.add(l.ecid);
      }
      if (tserver && (l.msg === 'committed' || l.msg === 'reservation cancelled'))
        found.ends.set(l.ecid, (found.ends.get(l.ecid) ?? 0) + 1);
      if (tserver && l.msg === 'reservation cancelled') {
        cancelled.push(l.ecid);
        if (l.keptCheckpoint) jobs.checkpointsKept++;
      }
      if (tserver && l.msg === 'checkpoint recorded') jobs.checkpointsRecorded++;
      if (compactor && l.msg?.startsWith('compaction committed')) found.compactorCommitted.add(l.ecid);
    }
  }
  jobs.splitJobs = splits.size;
  jobs.userSplitJobs = userSplits.size;
  jobs.subJobsReserved = subJobs.size;
  jobs.subJobsCancelled = cancelled.filter((e) => subJobs.has(e)).length;
  return found;
}
