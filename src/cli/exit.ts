/**
 * Exit codes of every command, as documented in the README:
 *   0  success
 *   1  a user error (bad argument, unknown name, invalid configuration), with a one-line message
 *   2  the cluster is unreachable (ZooKeeper, the manager or a tablet server), saying what was tried —
 *      never 1: a call that meets a manager failover is retried until EXC_MANAGER_FAILOVER_MS, and an
 *      answer meaning "not the active manager" or "stopping" is about the cluster, not the user
 *   5  `admin check` found the cluster inconsistent (its report says what)
 * Long-running processes add their own (see each command's --help; a compactor's is 4).
 */
import { ExcError, describeError } from '../errors.js';

const EXIT_USER_ERROR = 1;
const EXIT_UNREACHABLE = 2;
/**
 * `admin check` ran and found problems. Not 1: the command itself succeeded, and a script must tell "the
 * cluster is inconsistent" from "the check could not run" (1, 2). Not 4: the compactor's "queue deleted".
 */
export const EXIT_INCONSISTENT = 5;

const UNREACHABLE_CODES = new Set([
  'UNAVAILABLE',
  'TIMEOUT',
  'NOT_MANAGER',
  'SHUTTING_DOWN',
  'TOO_MANY_REQUESTS',
  'OUTCOME_UNKNOWN',
  'ZK_CONNECTION_LOSS',
  'ZK_TIMEOUT',
  'ZK_SESSION_LOST',
]);

function exitCodeFor(err: unknown): number {
  if (err instanceof ExcError && UNREACHABLE_CODES.has(err.code)) return EXIT_UNREACHABLE;
  return EXIT_USER_ERROR;
}

/** Runs a command's action; a failure prints one line to stderr and exits with its code. */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      process.stderr.write(`excompact: ${describeError(err)}\n`);
      if (!(err instanceof ExcError)) process.stderr.write(`${(err as Error)?.stack ?? ''}\n`);
      process.exit(exitCodeFor(err));
    }
  };
}
