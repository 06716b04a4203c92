/**
 * The PostgreSQL metadata store under faults a real deployment meets, against a real server
 * (test/support/postgres.ts): a connection lost after COMMIT was sent (the transaction may have committed:
 * the answer must not say "not applied", or the raw mutation would be sent again).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { PostgresBackend } from '../../src/meta/postgres.js';
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
  afterEach(async () => {
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
});
