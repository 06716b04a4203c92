/**
 * Every admin call that changes something can be sent twice — what a client does when a failover loses
 * the first answer — and is applied once, the repeat answered as the first. The calls go straight to the
 * manager with a fixed request id, as MetaClient sends them again.
 */
import { describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import type { ExcError } from '../../src/errors.js';
import { failedCol, parseTablet } from '../../src/meta/tablet.js';
import type { TableInfo } from '../../src/meta/views.js';
import type { QueueInfo } from '../../src/queue/registry.js';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { TestCompactor, useCluster, useProcesses, useZooKeeper } from '../support/index.js';

async function failure(promise: Promise<unknown>): Promise<ExcError> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => err as ExcError,
  );
}

describe('manager - requests sent twice', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('requests - a change sent twice with one request id is applied once and answered the same', async () => {
    const c = cluster();
    const manager = await c.startManager();
    await c.startTserver();
    const url = (await manager.waitForLog((l) => l.msg === 'manager listening')).url as string;
    const rpc = c.client(url);
    const meta = await c.meta();
    const twice = async <T>(send: (path: string) => Promise<T>, path: string): Promise<[T, T]> => {
      const id = ulid();
      const at = `${path}${path.includes('?') ? '&' : '?'}requestId=${id}`;
      return [await send(at), await send(at)];
    };

    // Queue create: the repeat gets the queue it created, not ALREADY_EXISTS; another request does.
    const [q1, q2] = await twice((p) => rpc.post<QueueInfo>(p, { name: 'q', bins: 4 }), '/v1/queues');
    expect(q2).toEqual(q1);
    expect((await failure(rpc.post(`/v1/queues?requestId=${ulid()}`, { name: 'q' }))).code).toBe(
      'ALREADY_EXISTS',
    );

    // Table create and configure.
    const [t1, t2] = await twice(
      (p) => rpc.post<TableInfo>(p, { name: 't', config: { queues: [{ queue: 'q' }] } }),
      '/v1/tables',
    );
    expect(t2).toEqual(t1);
    expect((await failure(rpc.post(`/v1/tables?requestId=${ulid()}`, { name: 't' }))).code).toBe(
      'ALREADY_EXISTS',
    );
    const [c1, c2] = await twice(
      (p) => rpc.post<TableInfo>(p, { config: { ratio: 2 } }),
      '/v1/tables/t/config',
    );
    expect(c2).toEqual(c1);
    expect(c1.config.ratio).toBe(2);

    // A user compaction is requested once: one compaction id, one request per tablet.
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger() });
    await client.ingest('t', [{ row: 'r', value: 'v' }]);
    const [u1, u2] = await twice((p) => rpc.post<{ id: string }>(p, {}), '/v1/tables/t/compact');
    expect(u2).toEqual(u1);
    const { tablets } = await meta.call<{ tablets: { tablet: string }[] }>('GET', '/v1/tables/t');
    const tablet = tablets[0]!.tablet;
    expect([...parseTablet(tablet, await meta.row(tablet)).userCompactions.keys()]).toEqual([u1.id]);

    // Cancel: the repeat finds the compaction ended by the first, and says it was cancelled.
    const compactor = await TestCompactor.start(c, 'q');
    const job = await compactor.reserve(tablet);
    expect(job).not.toBeNull();
    const [k1, k2] = await twice(
      (p) => rpc.post<{ cancelled: boolean }>(p, {}),
      `/v1/compactions/${job!.ecid}/cancel`,
    );
    expect([k1, k2]).toEqual([{ cancelled: true }, { cancelled: true }]);
    await compactor.close();

    // Release: the repeat lists exactly what the first released.
    const parked = { inputs: ['x'], attempts: 9, lastError: 'boom', at: 1, parked: true };
    await meta.mutate([
      { puts: ['k1', 'k2'].map((k) => ({ row: tablet, col: failedCol(k), value: JSON.stringify(parked) })) },
    ]);
    const [r1, r2] = await twice(
      (p) => rpc.post<{ released: { id: string }[] }>(p, { table: 't' }),
      '/v1/compactions/release',
    );
    expect(r1.released.map((r) => r.id).sort()).toEqual(['k1', 'k2']);
    expect(r2).toEqual(r1);

    // Deletes: the repeat is answered as the first, not UNKNOWN_TABLE / UNKNOWN_QUEUE.
    const [d1, d2] = await twice((p) => rpc.call<TableInfo>('DELETE', p), '/v1/tables/t');
    expect(d2).toEqual(d1);
    expect((await failure(rpc.call('DELETE', `/v1/tables/t?requestId=${ulid()}`))).code).toBe(
      'UNKNOWN_TABLE',
    );
    const [e1, e2] = await twice(
      (p) => rpc.call<{ deleted: QueueInfo }>('DELETE', p),
      '/v1/queues/q?force=true',
    );
    expect(e2).toEqual(e1);
    expect(e1.deleted.id).toBe(q1.id);
    expect((await failure(rpc.call('DELETE', `/v1/queues/q?requestId=${ulid()}`))).code).toBe(
      'UNKNOWN_QUEUE',
    );
  });
});
