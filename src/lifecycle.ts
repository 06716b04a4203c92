/**
 * Signal handling for long-running processes, in one place: the first SIGTERM or SIGINT starts a clean
 * shutdown (`close`, then exit with its code); a second one, or a shutdown that takes longer than
 * `forceAfterMs`, exits at once. With EXC_EXIT_WITH_PARENT=1 the process also shuts down when its parent
 * process goes away.
 *
 * A shutdown is bounded even when everything a process talks to is gone or hangs (ZooKeeper, the
 * manager, every tablet server): each step gets SHUTDOWN_STEP_MS and is left behind, logged, when it takes
 * longer; the whole gets SHUTDOWN_MS (plus a compactor's grace for its running jobs) before the process
 * exits regardless.
 */
import { describeError, ExcError } from './errors.js';
import type { Logger } from './log.js';
import { withTimeout } from './retry.js';

/** How long a shutdown may take after a process's own grace, whatever it waits on. */
export const SHUTDOWN_MS = 10_000;
/** How long one step of a shutdown may take before the next one runs. */
export const SHUTDOWN_STEP_MS = 2_000;

export interface ShutdownOptions {
  /** Give up on a clean shutdown after this long (default SHUTDOWN_MS). */
  forceAfterMs?: number;
}

export function onShutdownSignals(
  log: Logger,
  close: (signal: NodeJS.Signals) => Promise<number | void>,
  options: ShutdownOptions = {},
): void {
  let shuttingDown = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (shuttingDown) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    shuttingDown = true;
    log.info({ signal }, 'shutting down');
    const forceAfterMs = options.forceAfterMs ?? SHUTDOWN_MS;
    const force = setTimeout(() => {
      log.error({ forceAfterMs }, 'clean shutdown took too long: exiting');
      process.exit(1);
    }, forceAfterMs);
    force.unref();
    close(signal).then(
      (code) => {
        log.info({ code: code ?? 0 }, 'stopped');
        process.exit(code ?? 0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  // Children of a supervisor (`excompact local`, the test harness) stop when it dies, even by SIGKILL.
  if (process.env.EXC_EXIT_WITH_PARENT === '1') {
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) handler('SIGTERM');
    }, 1_000).unref();
  }
}

/** One step of a clean shutdown: its name (for the log) and what to do. */
export type ShutdownStep = [name: string, step: () => unknown];

/**
 * Runs shutdown steps in order, each in its own try/catch and with its own time limit: a step that fails or
 * hangs is logged (what could not be done) and the rest still run, so one stuck part never keeps the
 * others (and the process) alive.
 */
export async function runShutdownSteps(
  log: Logger,
  steps: ShutdownStep[],
  stepTimeoutMs = SHUTDOWN_STEP_MS,
): Promise<void> {
  for (const [name, step] of steps) {
    try {
      await withTimeout(
        Promise.resolve().then(step),
        stepTimeoutMs,
        () => new ExcError('TIMEOUT', `did not finish within ${stepTimeoutMs} ms`),
      );
    } catch (err) {
      log.warn({ step: name, err: describeError(err) }, 'shutdown step failed: going on without it');
    }
  }
}
