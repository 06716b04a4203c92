/**
 * Signal handling for long-running processes, in one place: the first SIGTERM or SIGINT starts a clean
 * shutdown (`close`, then exit with its code); a second one, or a shutdown that takes longer than
 * `forceAfterMs`, exits at once. With EXC_EXIT_WITH_PARENT=1 the process also shuts down when its parent
 * process goes away.
 */
import { describeError } from './errors.js';
import type { Logger } from './log.js';

export interface ShutdownOptions {
  /** Give up on a clean shutdown after this long (default 30 s). */
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
    const force = setTimeout(() => {
      log.error({ forceAfterMs: options.forceAfterMs ?? 30_000 }, 'clean shutdown took too long: exiting');
      process.exit(1);
    }, options.forceAfterMs ?? 30_000);
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
 * Runs shutdown steps in order, each in its own try/catch: a step that fails is logged and the rest still
 * run, so one stuck part never keeps the others (and the process) alive.
 */
export async function runShutdownSteps(log: Logger, steps: ShutdownStep[]): Promise<void> {
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (err) {
      log.warn({ step: name, err: describeError(err) }, 'shutdown step failed');
    }
  }
}
