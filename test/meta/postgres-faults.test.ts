/**
 * The PostgreSQL metadata store under faults a real deployment meets, against a real server
 * (test/support/postgres.ts): a connection lost after COMMIT was sent (the transaction may have committed:
 * the answer must not say "not applied", or the raw mutation would be sent again), and a holder of the
 * writers' lock that stops answering (a paused manager: the server must end its transaction, and a waiter
 * must get an error it can retry instead of waiting for ever).
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { PostgresBackend } from '../../src/meta/postgres.js';
import { createPool } from '../../src/meta/postgres-pool.js';
import { BackendWriter } from '../../src/meta/writer.js';
import { isNotAppliedCode, notApplied } from '../../src/rpc/client.js';
import { startProxy, usePostgres, type TcpProxy } from '../support/index.js';

/** Settles `promise` as a value or an error, or 'still waiting' after `ms`. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T | ExcError | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>(
    (resolve) => (timer = setTimeout(() => resolve('still waiting'), ms)),
  );
  try {
    return await Promise.race([promise.catch((err: ExcError) => err), late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('PostgreSQL metadata store - faults', () => {
  const postgres = usePostgres();
  const cleanups: (() => Promise<unknown>)[] = [];
  const holders: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    // Holders first: a backend closes only once the transactions waiting behind them are done.
    for (const end of holders.splice(0)) await end().catch(() => undefined);
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  async function open(url: string): Promise<PostgresBackend> {
    const backend = await PostgresBackend.open({ url });
    cleanups.push(() => backend.close());
    return backend;
  }

  async function proxied(url: string): Promise<{ url: string; proxy: TcpProxy }> {
    const u = new URL(url);
    const proxy = await startProxy(Number(u.port), u.hostname);
    cleanups.push(() => proxy.stop());
    u.port = String(proxy.port);
    return { url: u.toString(), proxy };
  }

  /**
   * A connection that takes the writers' lock and then says nothing more (a paused holder): one of the
   * store's own pool (with the settings it gives every connection) when `ofTheStore`, else a plain one.
   */
  async function holdWriterLock(url: string, ofTheStore: boolean): Promise<pg.ClientBase> {
    let holder: pg.ClientBase;
    if (ofTheStore) {
      const pool = createPool(url, 1);
      const client = await pool.connect();
      holders.push(async () => {
        client.release(true);
        await pool.end();
      });
      holder = client;
    } else {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      holders.push(() => client.end());
      holder = client;
    }
    // The server may end the connection under it: that is what a test waits for.
    holder.on('error', () => undefined);
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM writer_lock WHERE id = 1 FOR UPDATE');
    return holder;
  }

  it(
    'commit - a connection lost after COMMIT was sent is an unknown outcome, never "not applied"',
    { timeout: 30_000 },
    async () => {
      const direct = await postgres().freshDatabase();
      await open(direct); // creates the tables
      const { url, proxy } = await proxied(direct);
      const backend = await open(url);
      const load = {
        conditions: [
          { op: 'equals' as const, row: 't;a', col: 'future', value: 'ts1' },
          { op: 'absent' as const, row: 't;a', col: 'loc' },
        ],
        puts: [{ row: 't;a', col: 'loc', value: 'ts1' }],
        deletes: [{ row: 't;a', col: 'future' }],
      };
      expect(await backend.applyBatch([{ puts: [{ row: 't;a', col: 'future', value: 'ts1' }] }])).toEqual([
        { applied: true },
      ]);

      // The server gets the COMMIT and commits; its answer never comes back.
      proxy.cutAfterClientData((chunk) => chunk.includes('COMMIT\0'));
      const err = await within(20_000, backend.applyBatch([load]));
      expect(proxy.cuts).toBe(1);
      expect(err).toBeInstanceOf(ExcError);
      const e = err as ExcError;
      expect(e.code).toBe('OUTCOME_UNKNOWN');
      // Neither the error itself nor the code a manager would answer with says "not applied".
      expect(notApplied(e)).toBe(false);
      expect(isNotAppliedCode(e.code)).toBe(false);

      // It did commit: sending the mutation again would fail its condition.
      const reader = await open(direct);
      expect(await reader.get('t;a', 'loc')).toBe('ts1');
      expect(await reader.get('t;a', 'future')).toBeUndefined();
      // The backend goes on working on a new connection.
      expect(await backend.applyBatch([{ puts: [{ row: 't;b', col: 'x', value: '1' }] }])).toEqual([
        { applied: true },
      ]);
    },
  );

  it(
    'takeover - a takeover whose COMMIT lost its answer is run again (it only fences once more)',
    { timeout: 30_000 },
    async () => {
      const direct = await postgres().freshDatabase();
      await open(direct);
      const { url, proxy } = await proxied(direct);
      const backend = await open(url);
      proxy.cutAfterClientData((chunk) => chunk.includes('COMMIT\0'));
      const refusals: string[] = [];
      const outcome = await within(
        20_000,
        new BackendWriter(backend).takeOver({ onLocked: (err) => refusals.push(err.code) }),
      );
      expect(proxy.cuts).toBe(1);
      // The first takeover committed epoch 1 unseen; the second one took epoch 2, and holds it.
      expect(refusals).toEqual(['OUTCOME_UNKNOWN']);
      expect(outcome).toBe(2);
      expect(backend.managerEpoch).toBe(2);
      expect(await backend.storedEpoch()).toBe(2);
    },
  );

  it(
    'writer lock - a waiter behind a holder that never finishes gets a retryable error, not a hang',
    { timeout: 40_000 },
    async () => {
      const url = await postgres().freshDatabase();
      const backend = await open(url);
      // A holder without the store's settings (psql, say): nothing on the server ends its transaction.
      await holdWriterLock(url, false);
      const started = Date.now();
      const outcome = await within(20_000, backend.takeOver());
      expect(outcome).toBeInstanceOf(ExcError);
      expect((outcome as ExcError).code).toBe('UNAVAILABLE');
      expect(isNotAppliedCode((outcome as ExcError).code)).toBe(true);
      expect(Date.now() - started).toBeLessThan(20_000);
    },
  );

  it(
    'writer lock - a paused manager holding it is ended by the server, and the successor takes over',
    { timeout: 40_000 },
    async () => {
      const url = await postgres().freshDatabase();
      const backend = await open(url);
      expect(await backend.takeOver()).toBe(1);
      // A connection of the old manager's pool took the lock, and the manager stopped.
      const holder = await holdWriterLock(url, true);
      const successor = await open(url);
      const refusals: string[] = [];
      const outcome = await within(
        20_000,
        new BackendWriter(successor).takeOver({ onLocked: (err) => refusals.push(err.code) }),
      );
      expect(outcome).toBe(2);
      // The holder's transaction is gone: resumed, it cannot commit anything.
      await expect(holder.query('SELECT 1')).rejects.toThrow();
      // The old manager is fenced.
      await expect(
        backend.applyBatch([{ puts: [{ row: 'r', col: 'c', value: 'v' }] }]),
      ).rejects.toMatchObject({
        code: 'NOT_MANAGER',
      });
    },
  );

  it('fencing - a stored epoch that is not a whole number is refused by name, never read as NaN', async () => {
    const url = await postgres().freshDatabase();
    const backend = await open(url);
    expect(await backend.takeOver()).toBe(1);
    const raw = new pg.Client({ connectionString: url });
    await raw.connect();
    cleanups.push(() => raw.end());
    for (const mangled of ['x', '1.5', '-1']) {
      await raw.query(`UPDATE cells SET val = $1 WHERE row = '~instance' AND col = 'managerEpoch'`, [
        mangled,
      ]);
      await expect(backend.storedEpoch()).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
      await expect(backend.takeOver()).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    }
  });
});
