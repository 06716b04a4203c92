/**
 * A compactor's own health. Jobs that fail one after another on the same compactor say more about the
 * compactor than about the jobs: a full disk, an object store it can read but not write, a bad native
 * build, too little memory. So after each failed job the compactor waits before it takes another
 * (exponentially longer, up to a cap: its failures stop using up healthy jobs' attempts at the speed of a
 * loop), after `sickAfter` failures in a row it reports itself unhealthy (`/healthz`, the
 * `excompact_compactor_healthy` gauge), and after `exitAfter` it exits with {@link EXIT_SICK} so that its
 * orchestrator replaces it. A committed job ends the streak.
 *
 * The tablet servers do their part: a job is parked only once it failed on two compactors, or on the
 * only one of its queue (meta/tablet-records.ts, isParked).
 */

export interface HealthOptions {
  /** The wait after the first failure in a row, doubled after each next one (default 1 s). */
  backoffMs: number;
  /** The longest wait (default 60 s). */
  backoffMaxMs: number;
  /** Failures in a row after which the compactor reports itself unhealthy (default 3). */
  sickAfter: number;
  /** Failures in a row after which it exits with EXIT_SICK (default 10; 0: never). */
  exitAfter: number;
}

export const DEFAULT_HEALTH: HealthOptions = {
  backoffMs: 1_000,
  backoffMaxMs: 60_000,
  sickAfter: 3,
  exitAfter: 10,
};

/** What to do after a failed job. */
export interface AfterFailure {
  /** Failures in a row, this one included. */
  streak: number;
  /** Wait this long before taking the next job. */
  waitMs: number;
  /** Exit: the streak reached `exitAfter`. */
  exit: boolean;
}

export class Health {
  private failures = 0;

  constructor(private readonly options: HealthOptions = DEFAULT_HEALTH) {}

  /** Failed jobs in a row (0 after a commit). */
  get streak(): number {
    return this.failures;
  }

  get healthy(): boolean {
    return this.failures < this.options.sickAfter;
  }

  failed(): AfterFailure {
    this.failures++;
    const { backoffMs, backoffMaxMs, exitAfter } = this.options;
    return {
      streak: this.failures,
      waitMs: Math.min(backoffMaxMs, backoffMs * 2 ** Math.min(30, this.failures - 1)),
      exit: exitAfter > 0 && this.failures >= exitAfter,
    };
  }

  committed(): void {
    this.failures = 0;
  }
}
