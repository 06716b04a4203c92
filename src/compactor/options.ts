/**
 * The compactor's options and lifecycle (compactor.ts is the process): what the command line and tests
 * pass, with defaults, and the states it moves through.
 */
import type { Lifecycle, ServerOptions } from '../process.js';
import type { CompactFilesArgs, CompactionResult, ObjectStore } from '../storage/index.js';

export type CompactorState = 'connecting' | 'serving' | 'suspended' | 'expired' | 'rejoining';

/**
 * A compactor's life: a disconnection within the session timeout changes nothing (its jobs run on, its
 * reservations stand); when its session expires or its node is deleted, its jobs are abandoned (their
 * commits would be refused) and it registers again with a new node.
 */
export const COMPACTOR_LIFECYCLE: Lifecycle<CompactorState> = {
  connecting: ['serving'],
  serving: ['suspended', 'expired'],
  suspended: ['serving', 'expired'],
  expired: ['rejoining'],
  rejoining: ['serving'],
};

export interface CompactorOptions extends ServerOptions {
  queue: string;
  store: ObjectStore;
  /** Jobs at once (default 1). */
  concurrency: number;
  /**
   * Runs one compaction (default: compactFiles on this thread). The command line passes
   * a pool of threads (compaction-thread.ts) when concurrency > 1, so that N jobs use N cores.
   */
  compact?: (args: CompactFilesArgs) => Promise<CompactionResult>;
  /** How long an idle compactor's request for work waits on the manager (default 15 s). */
  longPollMs: number;
  /** On SIGTERM, let running jobs finish for this long before releasing them (default 0: release at once). */
  graceMs: number;
  /** Progress reports to the tablet server at most this often (default 2 s). */
  progressEveryMs: number;
  /** Jobs with this much input checkpoint their output about this often (EXC_CHECKPOINT_*). */
  checkpointBytes?: number;
  checkpointMs?: number;
  /** Merge in native code when a job allows it (EXC_NATIVE_MERGE; default true). */
  nativeMerge?: boolean;
  /** Back-off, health and exit after failed jobs in a row (health.ts; EXC_COMPACTOR_*; defaults there). */
  compactorBackoffMs?: number;
  compactorBackoffMaxMs?: number;
  compactorSickAfter?: number;
  compactorExitAfter?: number;
  /** Exit code when the queue is deleted (EXC_QUEUE_GONE_EXIT_CODE; default EXIT_QUEUE_DELETED of exit-codes.ts). */
  queueGoneExitCode?: number;
}
