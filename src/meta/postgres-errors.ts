/**
 * What a failure of the PostgreSQL metadata store (postgres.ts) means to its callers, as one stable code.
 *
 * - The server answered a statement with an ERROR (a SQLSTATE, severity ERROR): the transaction is rolled
 *   back, even when the statement was COMMIT. UNAVAILABLE when another try may succeed (contention, a
 *   lock or statement timeout, resources), INTERNAL otherwise (a bug, a broken schema: the same batch
 *   would fail again).
 * - The connection was lost — a socket error, node-pg's "Connection terminated…" (which has no code), or
 *   the server ending the session (severity FATAL or PANIC: shutdown, idle-in-transaction timeout) —
 *   before COMMIT was sent: the server rolls the transaction back, so nothing was applied: UNAVAILABLE.
 * - The same once COMMIT was sent: the transaction may well have committed and only its answer been lost.
 *   OUTCOME_UNKNOWN, which is not one of the codes that say "not applied" (rpc/client.ts): a raw mutation
 *   is never sent again on it; its sender reads the rows back instead.
 * - Anything else (no SQLSTATE and no connection cause: a RangeError from the driver, a bug of ours):
 *   INTERNAL, never retried — it would fail the same way for ever.
 */
import { ExcError } from '../errors.js';

/** SQLSTATEs of an ERROR worth another try: nothing of the transaction was applied. */
const RETRY_STATES: readonly RegExp[] = [
  /^40001$/, // serialization failure (CockroachDB's retry error)
  /^40P01$/, // deadlock detected
  /^55P03$/, // lock not available: lock_timeout, waiting behind a writer that does not finish
  /^57014$/, // query canceled: statement_timeout
  /^53/, // insufficient resources (too many connections, out of memory or disk)
];

/** SQLSTATEs that end the session (connection exception, operator intervention, idle-in-transaction timeout). */
const SESSION_ENDED = /^(08|57P|25P03$)/;

/**
 * node-pg's own errors for a lost or unusable connection: it gives them no code. Every one means the
 * socket is gone (the client is not used again), never that the server refused something.
 */
const DRIVER_CONNECTION_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout exceeded when trying to connect)/;

export interface StoreErrorContext {
  /** COMMIT was sent on this connection: a lost connection leaves the outcome unknown. */
  commitSent?: boolean;
  /** The connection reported an error of its own while in use (it is broken, whatever `err` says). */
  connectionLost?: boolean;
}

/** The error as its stable code (see the module comment); an ExcError is kept as it is. */
export function storeError(err: unknown, where: string, context: StoreErrorContext = {}): ExcError {
  if (err instanceof ExcError) return err;
  const message = `the metadata store at ${where} failed: ${err instanceof Error ? err.message : String(err)}`;
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  const sqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
  // A statement's ERROR answers the statement: authoritative, even for COMMIT, and even if the connection
  // broke afterwards.
  if (sqlState !== undefined && severity === 'ERROR') {
    const retry = RETRY_STATES.some((s) => s.test(sqlState)) || SESSION_ENDED.test(sqlState);
    return new ExcError(retry ? 'UNAVAILABLE' : 'INTERNAL', message, { cause: err, details: { sqlState } });
  }
  const lost =
    context.connectionLost === true ||
    (sqlState !== undefined &&
      (severity === 'FATAL' || severity === 'PANIC' || SESSION_ENDED.test(sqlState))) ||
    // A socket's errno (ECONNRESET, EPIPE, ETIMEDOUT…) or Node's ERR_STREAM_… on a destroyed socket; not
    // Node's argument errors (ERR_INVALID_ARG_TYPE is a TypeError: a bug).
    (typeof code === 'string' &&
      /^E[A-Z0-9_]+$/.test(code) &&
      !(err instanceof TypeError || err instanceof RangeError)) ||
    (err instanceof Error && code === undefined && DRIVER_CONNECTION_MESSAGES.test(err.message));
  if (lost && context.commitSent) {
    return new ExcError(
      'OUTCOME_UNKNOWN',
      `${message}; the connection was lost after COMMIT was sent: the change may or may not have been applied`,
      { cause: err, details: { sqlState: sqlState ?? null } },
    );
  }
  if (lost)
    return new ExcError('UNAVAILABLE', message, { cause: err, details: { sqlState: sqlState ?? null } });
  if (sqlState !== undefined) {
    // A SQLSTATE without a severity (not from node-pg's parser): judged by its class alone.
    const retry = RETRY_STATES.some((s) => s.test(sqlState));
    return new ExcError(retry ? 'UNAVAILABLE' : 'INTERNAL', message, { cause: err, details: { sqlState } });
  }
  return new ExcError('INTERNAL', message, { cause: err });
}
