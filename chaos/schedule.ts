/**
 * The chaos run's fault schedule: a list of faults at random times (a Poisson process), each with its
 * kind, target (a slot index within its role) and durations (how long a pause or an object-store fault
 * lasts, when a killed process comes back), drawn before the run starts, so that a seed names one
 * schedule. Faults overlap: a tablet server may be paused while the object store fails and a compactor is
 * killed. The injector (faults.ts) carries it out.
 */
import type { Fault } from '../test/support/fault-proxy.js';
import type { Rng } from './rng.js';

export const FAULT_KINDS = [
  'compactor-kill',
  'compactor-zombie',
  'compactor-term',
  'compactor-pause',
  'tserver-kill',
  'tserver-zombie',
  'tserver-pause',
  'manager-kill',
  'manager-zombie',
  's3-errors',
  's3-slow',
  's3-resets',
  's3-half-put',
  'zk-node-delete',
  'admin-cancel',
  'queue-recreate',
  'peer-cut',
  'zk-leader-kill',
  'zk-follower-kill',
  'zk-cut',
  'zk-partition',
  'table-split',
  'table-merge',
  'tserver-drain',
  'tserver-join',
  'table-offline',
  'table-delete',
  'bulk-import',
  'compactor-sick',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults of ZooKeeper itself, and of processes' ways to it (off with --no-zk-faults). */
const ZK_FAULTS: ReadonlySet<FaultKind> = new Set([
  'zk-leader-kill',
  'zk-follower-kill',
  'zk-cut',
  'zk-partition',
]);

const WEIGHTS: Record<FaultKind, number> = {
  'compactor-kill': 14,
  'compactor-zombie': 6,
  'compactor-term': 6,
  'compactor-pause': 4,
  'tserver-kill': 5,
  'tserver-zombie': 3,
  'tserver-pause': 3,
  'manager-kill': 3,
  'manager-zombie': 2,
  's3-errors': 4,
  's3-slow': 3,
  's3-resets': 3,
  's3-half-put': 3,
  'zk-node-delete': 6,
  'admin-cancel': 6,
  'queue-recreate': 1,
  'peer-cut': 4,
  'zk-leader-kill': 3,
  'zk-follower-kill': 2,
  'zk-cut': 3,
  'zk-partition': 2,
  // Elastic tablets: admin splits and merges (a small splitThreshold splits tablets by themselves too,
  // and merged ones again), drains, and a tablet server that joins for a while and leaves with SIGTERM.
  'table-split': 14,
  'table-merge': 30,
  'tserver-drain': 3,
  'tserver-join': 2,
  // A table taken offline for a few seconds (its running compactions cancelled) and brought back.
  'table-offline': 3,
  // A scratch table (outside the workload's model) written, compacting, and deleted: nothing of it may
  // be left behind (the final collection finds no orphan) or commit after the delete.
  'table-delete': 3,
  // A file of new rows over every tablet of a workload table, imported (and run again until it succeeds)
  // while compactions, splits and merges run: each entry once, deletes in it applied.
  'bulk-import': 4,
  // A compactor of `small` whose object-store writes all fail, for 15 s or more: it backs off, exits 5
  // and is started again; no job may be parked by its failures alone.
  'compactor-sick': 2,
};

/** What each object-store fault does to the requests through the proxy while it lasts. */
export const STORE_FAULTS: Partial<Record<FaultKind, { p: number; faults: Fault[]; method?: string }>> = {
  's3-errors': {
    p: 0.3,
    faults: [
      { kind: 'status', status: 503, code: 'SlowDown' },
      { kind: 'status', status: 500, code: 'InternalError' },
    ],
  },
  's3-slow': {
    p: 0.5,
    faults: [
      { kind: 'delay', ms: 300 },
      { kind: 'delay', ms: 1_500 },
    ],
  },
  's3-resets': { p: 0.2, faults: [{ kind: 'reset' }] },
  's3-half-put': { p: 0.5, faults: [{ kind: 'cut-request', fraction: 0.5 }], method: 'PUT' },
};

export interface ScheduledFault {
  /** Milliseconds after the start of the faults. */
  at: number;
  kind: FaultKind;
  /** Slot index within the role (or the queue's compactors), reduced modulo their number. */
  target: number;
  /** How long a pause or an object-store fault lasts. */
  durationMs: number;
  /** When a stopped process is started again, after it exited. */
  restartAfterMs: number;
  /** A number for choices made at injection (which running compaction to cancel). */
  pick: number;
}

/** A fault carried out: when, and how long its effect lasted (a pause, a window, a process down). */
export interface FaultSpan {
  fault: string;
  target: string;
  at: number;
  forMs: number;
}

export interface ScheduleOptions {
  durationMs: number;
  meanIntervalMs: number;
  sessionTimeoutMs: number;
  zkFaults: boolean;
}

export function makeSchedule(rng: Rng, options: ScheduleOptions): ScheduledFault[] {
  const weights = Object.fromEntries(
    FAULT_KINDS.filter((k) => options.zkFaults || !ZK_FAULTS.has(k)).map((k) => [k, WEIGHTS[k]]),
  ) as Record<FaultKind, number>;
  const session = options.sessionTimeoutMs;
  const out: ScheduledFault[] = [];
  for (let at = rng.exponential(options.meanIntervalMs); at < options.durationMs;) {
    const kind = rng.weighted(weights);
    const long = kind.endsWith('-zombie') || kind === 'zk-partition';
    out.push({
      at: Math.round(at),
      kind,
      target: rng.int(0, 1_000),
      // A zombie is paused well past its session timeout; a plain pause stays well inside it.
      durationMs: long
        ? rng.int(Math.round(1.5 * session), Math.round(2.5 * session))
        : kind.endsWith('-pause') || kind === 'zk-cut'
          ? rng.int(100, Math.round(0.4 * session))
          : kind === 'tserver-join'
            ? rng.int(8_000, 25_000)
            : rng.int(1_000, 8_000),
      restartAfterMs: rng.int(200, 4_000),
      pick: rng.int(0, 1_000_000),
    });
    at += rng.exponential(options.meanIntervalMs);
  }
  return out;
}
