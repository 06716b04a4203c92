/**
 * A real PostgreSQL server per suite (src/meta/embedded-postgres.ts: Debian's package, run as the
 * `postgres` user when we are root), without fsync: a test's data need not survive the machine. Each
 * test takes a database of its own.
 *
 *   const pg = usePostgres();              // in a describe block: started in beforeAll, stopped in afterAll
 *   const url = await pg().database('t1');
 */
import { afterAll, beforeAll } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/meta/embedded-postgres.js';
import { tempDir, uniqueName } from './tmp.js';

export interface TestPostgres extends EmbeddedPostgres {
  /** A new, empty database's URL. */
  freshDatabase(): Promise<string>;
}

export function usePostgres(): () => TestPostgres {
  let server: TestPostgres | undefined;
  let dir: ReturnType<typeof tempDir> | undefined;
  beforeAll(async () => {
    dir = tempDir('pg');
    const pg = await startEmbeddedPostgres({ dir: dir.path, durable: false });
    server = { ...pg, freshDatabase: () => pg.database(uniqueName('t').toLowerCase()) };
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    dir?.cleanup();
  });
  return () => {
    if (!server) throw new Error('PostgreSQL is not started: call usePostgres() inside a describe block');
    return server;
  };
}
