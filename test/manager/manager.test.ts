import { describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import { INGEST_ROW_PREFIX, ingestRow } from '../../src/meta/ingest-ids.js';
import type { TableInfo, TabletView } from '../../src/meta/views.js';
import { createQueue } from '../../src/queue/registry.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

async function failure(promise: Promise<unknown>): Promise<ExcError> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => err as ExcError,
  );
}

describe('manager', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('failover - a standby takes over when the active manager is killed, and serves the same data', async () => {
    const first = await cluster().startManager({ name: 'manager-1' });
    const second = await cluster().startManager({ name: 'manager-2', standby: true });
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 'orders', splits: ['g', 'p'] });

    // The standby refuses to serve: only one manager is active.
    const standbyUrl = (await second.waitForLog((l) => l.msg === 'manager listening')).url as string;
    const refused = await failure(cluster().client(standbyUrl).get('/v1/tables'));
    expect(refused.code).toBe('NOT_MANAGER');

    first.kill();
    await second.waitForLog((l) => l.msg === 'manager active', cluster().sessionTimeoutMs + 10_000);
    const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
    expect(tables.map((t) => t.name)).toEqual(['orders']);
    const shown = await meta.call<{ tablets: TabletView[] }>('GET', '/v1/tables/orders');
    expect(shown.tablets.map((t) => t.endRowHex)).toEqual([
      Buffer.from('g').toString('hex'),
      Buffer.from('p').toString('hex'),
      null,
    ]);
    // The new manager fenced the old one's epoch.
    const status = await meta.call<{ epoch: number }>('GET', '/v1/status');
    expect(status.epoch).toBe(2);
  });

  it('tables - create with split points, list, show, configure, delete', async () => {
    await cluster().startManager();
    const meta = await cluster().meta();
    await createQueue(await cluster().session(), cluster().layout, 'small');

    const created = await meta.call<TableInfo>('POST', '/v1/tables', {
      name: 'events',
      splits: ['m'],
      config: { versions: 3 },
    });
    expect(created).toMatchObject({ name: 'events', state: 'online', config: { versions: 3, ratio: 3 } });
    const configured = await meta.call<TableInfo>('POST', '/v1/tables/events/config', {
      config: { queues: [{ queue: 'small' }], ttlMs: 60_000 },
    });
    expect(configured.config).toMatchObject({ versions: 3, ttlMs: 60_000, queues: [{ queue: 'small' }] });

    const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
    expect(tables).toHaveLength(1);
    const shown = await meta.call<{ table: TableInfo; tablets: TabletView[] }>('GET', '/v1/tables/events');
    expect(shown.tablets).toHaveLength(2);
    expect(shown.tablets[1]!.prevEndRowHex).toBe(Buffer.from('m').toString('hex'));

    // The ingest ids a tablet server recorded for each tablet, in their own rows.
    await meta.mutate(
      shown.tablets.map((t) => ({ puts: [{ row: ingestRow(t.tablet), col: 'batch-1', value: '1' }] })),
    );
    await meta.call('DELETE', '/v1/tables/events');
    expect((await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables')).tables).toEqual([]);
    const cells = [];
    for await (const c of meta.scanAll({ start: '0000', end: '~' })) cells.push(c);
    for await (const c of meta.scanAll({ prefix: INGEST_ROW_PREFIX })) cells.push(c);
    expect(cells).toEqual([]);
  });

  it('tables - bad input gets a clear 4xx and changes nothing', async () => {
    await cluster().startManager();
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 'kept', splits: ['b'] });
    const before = [];
    for await (const c of meta.scanAll({})) before.push(c);

    const cases: [unknown, string, RegExp][] = [
      [{ name: 'kept' }, 'ALREADY_EXISTS', /already exists/],
      [{ name: 'x', splits: ['b', 'a'] }, 'BAD_REQUEST', /must be sorted: "b" comes before "a"/],
      [{ name: 'x', splits: ['a', 'a'] }, 'BAD_REQUEST', /duplicate split point "a"/],
      [{ name: 'x', config: { ratio: 0.5 } }, 'BAD_REQUEST', /config\.ratio/],
      [{ name: 'x', config: { versions: 'many' } }, 'BAD_REQUEST', /config\.versions/],
      [{ name: 'x', config: { colour: 'blue' } }, 'BAD_REQUEST', /colour/],
      [{ name: 'x', config: { queues: [{ queue: 'nope' }] } }, 'UNKNOWN_QUEUE', /no queue named "nope"/],
      [{ name: '../etc' }, 'BAD_REQUEST', /invalid table name/],
      [{ name: 'x', splits: 'a,b' }, 'BAD_REQUEST', /body\.splits/],
    ];
    for (const [body, code, message] of cases) {
      const err = await failure(meta.call('POST', '/v1/tables', body));
      expect(err.code, JSON.stringify(body)).toBe(code);
      expect(err.message).toMatch(message);
    }
    expect((await failure(meta.call('GET', '/v1/tables/missing'))).code).toBe('UNKNOWN_TABLE');
    expect((await failure(meta.call('DELETE', '/v1/tables/missing'))).code).toBe('UNKNOWN_TABLE');
    expect(
      (await failure(meta.call('POST', '/v1/tables/kept/config', { config: { maxFiles: 1 } }))).message,
    ).toMatch(/config\.maxFiles/);

    const after = [];
    for await (const c of meta.scanAll({})) after.push(c);
    expect(after).toEqual(before);
  });

  it('meta - of two racing conditional mutations exactly one applies; the loser changes nothing', async () => {
    await cluster().startManager();
    const meta = await cluster().meta();
    await meta.mutate([{ puts: [{ row: 'race', col: 'owner', value: 'none' }] }]);
    const contenders = Array.from({ length: 16 }, (_, i) =>
      meta.mutate([
        {
          conditions: [{ op: 'equals', row: 'race', col: 'owner', value: 'none' }],
          puts: [
            { row: 'race', col: 'owner', value: `c${i}` },
            { row: `race-${i}`, col: 'won', value: 'yes' },
          ],
        },
      ]),
    );
    const results = (await Promise.all(contenders)).map((r) => r[0]!);
    expect(results.filter((r) => r.applied)).toHaveLength(1);
    const winner = results.findIndex((r) => r.applied);
    const rows = [];
    for await (const c of meta.scanAll({ prefix: 'race-' })) rows.push(c.row);
    expect(rows).toEqual([`race-${winner}`]);
    expect((await meta.row('race')).get('owner')).toBe(`c${winner}`);
  });
});
