/**
 * The manager with its metadata store on PostgreSQL (EXC_META), against a real server: the active and
 * the standby manager share nothing but the database (each has a data directory of its own, no shared
 * volume). The standby takes over when the active one is killed, with every table, file and queue entry
 * there; a manager paused past its session and resumed after the takeover stops serving (its writes would
 * fail on the epoch in the database: test/meta/backend.test.ts); and the store really is the database.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { createQueue } from '../../src/queue/registry.js';
import { tempDir, useCluster, usePostgres, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

describe('manager on PostgreSQL', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const postgres = usePostgres();
  let url = '';
  const cluster = useCluster(zk, procs, { env: () => ({ EXC_META: url }) });

  async function cells(prefix: string): Promise<number> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const r = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM cells WHERE row LIKE $1', [
        `${prefix}%`,
      ]);
      return Number(r.rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  it('failover - a standby with a data directory of its own takes over from the database; the old manager, resumed, stops serving', async () => {
    url = await postgres().freshDatabase();
    const c = cluster();
    const ownDir = (name: string) => ({ EXC_DATA_DIR: tempDir(name).path });
    const first = await c.startManager({ name: 'manager-1', env: ownDir('m1') });
    const standby = await c.startManager({ name: 'manager-2', standby: true, env: ownDir('m2') });
    await c.startTserver();
    await createQueue(await c.session(), c.layout, 'q', 2);
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['m'], config: { queues: [{ queue: 'q' }] } });
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger() });
    const rows = (ts: number) =>
      Array.from({ length: 40 }, (_, i) => ({ row: `r${i}`, ts, value: `v${ts}` }));
    const values = async () => {
      const out: string[] = [];
      for await (const e of client.scan('t')) out.push(e.value.toString('utf8'));
      return out;
    };
    for (let ts = 1; ts <= 3; ts++) await client.ingest('t', rows(ts));
    // The store is the database: the table and its tablets are rows there.
    expect(await cells('~table:')).toBeGreaterThan(0);
    expect(await cells('~cq:')).toBeGreaterThan(0);

    // Paused past its session: the standby takes over, from the database alone.
    first.pause();
    await standby.waitForLog((l) => l.msg === 'manager active', c.sessionTimeoutMs + 15_000);
    expect(
      (await meta.call<{ tables: { name: string }[] }>('GET', '/v1/tables')).tables.map((t) => t.name),
    ).toEqual(['t']);
    await c.startCompactor('q');
    await waitFor(async () => (await cells('~cq:')) === 0, 'the queued work to be done by the new manager');
    expect(await values()).toEqual(Array.from({ length: 40 }, () => 'v3'));

    // Resumed, the old manager finds itself fenced by the epoch in the database, and stops serving.
    first.resume();
    await first.waitForLog((l) => l.msg === 'manager stops serving', 30_000);
    await client.ingest('t', rows(4));
    expect(await values()).toEqual(Array.from({ length: 40 }, () => 'v4'));
  });
});
