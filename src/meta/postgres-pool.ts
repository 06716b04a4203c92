/**
 * Connections to the PostgreSQL metadata store (postgres.ts), and a checkout that notices a connection lost
 * while in use.
 */
import pg from 'pg';

/** A pooled connection in use, and whether it reported itself broken meanwhile. */
export interface Connection {
  readonly client: pg.PoolClient;
  readonly lost: boolean;
  release(): void;
}

/** A pool of at most `max` connections to `url`. */
export function createPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
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
