/**
 * Connections to the PostgreSQL metadata store (postgres.ts): the session settings every one of them
 * carries, and a checkout that notices a connection lost while in use.
 */
import pg from 'pg';

/**
 * Session settings of every pooled connection, sent when it opens. Without them nothing times out a holder
 * of the writers' lock: a manager paused (SIGSTOP) in the middle of a batch, or whose host vanished
 * without a reset, leaves its transaction idle, and every other writer — its successor's takeover too —
 * waits on `SELECT … FOR UPDATE` for ever, with no error to log.
 */
export const SESSION_SETTINGS = {
  // A transaction of ours never waits on its client for long (a batch is decided in memory between its
  // statements): one idle this long belongs to a paused or vanished process. The server ends that session,
  // which rolls the transaction back and frees the lock; the process, resumed, finds its connection gone
  // before its COMMIT is sent (nothing applied).
  idle_in_transaction_session_timeout: 5_000,
  // A writer waits this long for the lock, then fails with 55P03: UNAVAILABLE, nothing applied, retried by
  // its sender (the takeover logs each refusal and tries again, so it takes over once the holder is gone).
  lock_timeout: 5_000,
  // A bound on any one statement (a scan page, a batch's writes), far above what they take.
  statement_timeout: 30_000,
  // TCP keepalive: a database host that vanished without a reset is noticed (the socket fails) instead of
  // a query waiting on its answer for ever.
  keepAlive: true,
  keepAliveInitialDelayMillis: 10_000,
} as const satisfies pg.ClientConfig;

/** A pooled connection in use, and whether it reported itself broken meanwhile. */
export interface Connection {
  readonly client: pg.PoolClient;
  readonly lost: boolean;
  release(): void;
}

/** A pool of at most `max` connections to `url`, each with {@link SESSION_SETTINGS}. */
export function createPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, ...SESSION_SETTINGS });
  // An idle connection the server dropped is replaced on next use; it must not crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A connection from the pool, listening for its errors while in use: the pool listens only while it is
 * idle, and a connection lost in use would otherwise emit an `error` nobody handles (the process would
 * crash). A broken one is discarded on release.
 */
export async function checkout(pool: pg.Pool): Promise<Connection> {
  const client = await pool.connect();
  let lost = false;
  const onError = (): void => {
    lost = true;
  };
  client.on('error', onError);
  return {
    client,
    get lost() {
      return lost;
    },
    release: () => {
      client.removeListener('error', onError);
      client.release(lost);
    },
  };
}
