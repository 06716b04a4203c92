/**
 * The manager's raw metadata routes (/v1/meta/mutate, /meta/row, /meta/rows, /meta/scan) against bad input, on both
 * backends (a real manager on SQLite, and on a real PostgreSQL server): a request the store must not
 * take gets a 400 naming what was wrong, and changes nothing. The routes are called as they are, not
 * through MetaClient.mutate, which checks each caller's mutations before it groups them
 * (test/meta/client.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import type { MetaClient } from '../../src/meta/client.js';
import { delRow } from '../../src/meta/keys.js';
import type { Cell, Mutation, MutationResult, ScanPage } from '../../src/meta/types.js';
import { useCluster, usePostgres, useProcesses, useZooKeeper } from '../support/index.js';

async function failure(promise: Promise<unknown>): Promise<ExcError> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => err as ExcError,
  );
}

/** One raw call of the mutate route (no request id: the route takes none). */
function mutateRaw(meta: MetaClient, mutations: Mutation[]): Promise<{ results: MutationResult[] }> {
  return meta.call('POST', '/v1/meta/mutate', { mutations }, { idempotent: false, requestId: false });
}

async function everything(meta: MetaClient): Promise<Cell[]> {
  const cells: Cell[] = [];
  for await (const c of meta.scanAll({})) cells.push(c);
  return cells;
}

describe.each(['sqlite', 'postgres'] as const)('manager meta API on %s', (kind) => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const postgres = kind === 'postgres' ? usePostgres() : undefined;
  let url = '';
  const cluster = useCluster(zk, procs, {
    env: (): Record<string, string> => (url ? { EXC_META: url } : {}),
  });

  async function start(): Promise<MetaClient> {
    url = postgres ? await postgres().freshDatabase() : '';
    await cluster().startManager();
    return cluster().meta();
  }

  it('mutate - a write to the store’s own row ~instance is refused with a 400 naming it, and changes nothing', async () => {
    const meta = await start();
    await meta.call('POST', '/v1/tables', { name: 't' });
    const before = await everything(meta);
    expect(before.find((c) => c.row === '~instance' && c.col === 'managerEpoch')?.value).toBe('1');

    const writes: Mutation[] = [
      { puts: [{ row: '~instance', col: 'managerEpoch', value: 'x' }] },
      { puts: [{ row: '~instance', col: 'managerEpoch', value: '7' }] },
      {
        puts: [
          { row: 'ok', col: 'c', value: 'v' },
          { row: '~instance', col: 'managerEpoch', value: '0' },
        ],
      },
      { deletes: [{ row: '~instance', col: 'managerEpoch' }] },
      { deleteRows: ['~instance'] },
    ];
    for (const m of writes) {
      const err = await failure(mutateRaw(meta, [m]));
      expect(err.code, JSON.stringify(m)).toBe('BAD_REQUEST');
      expect(err.message).toMatch(/~instance.*reserved to the metadata store/);
    }
    expect(await everything(meta)).toEqual(before);

    // The manager still writes (it was not fenced by its own store), and rows other processes write
    // under '~' (a file's deletion mark, as a tablet server writes it) still go through the route.
    const { results } = await mutateRaw(meta, [
      { puts: [{ row: delRow('tables/0001/Ix.rf'), col: 'at', value: '1' }] },
    ]);
    expect(results).toEqual([{ applied: true }]);
    await meta.call('POST', '/v1/tables', { name: 'u' });
    expect((await meta.row('~instance')).get('managerEpoch')).toBe('1');
  });

  it('NUL - a value, row, column prefix or scan bound holding U+0000 gets a 400 naming the field; nothing changes', async () => {
    const meta = await start();
    await mutateRaw(meta, [{ puts: [{ row: 'a', col: 'c', value: 'kept' }] }]);
    const before = await everything(meta);

    const mutations: [Mutation, RegExp][] = [
      [{ puts: [{ row: 'a', col: 'c', value: 'x\u0000y' }] }, /body\.mutations\.1\.puts\.0\.value: .*NUL/],
      [
        { conditions: [{ op: 'equals', row: 'a', col: 'c', value: '\u0000' }] },
        /body\.mutations\.1\.conditions\.0\.value: .*NUL/,
      ],
    ];
    for (const [m, message] of mutations) {
      const err = await failure(mutateRaw(meta, [{ puts: [{ row: 'b', col: 'c', value: 'v' }] }, m]));
      expect(err.code, JSON.stringify(m)).toBe('BAD_REQUEST');
      expect(err.message).toMatch(message);
    }

    const scans: [Record<string, unknown>, RegExp][] = [
      [{ start: 'a\u0000' }, /body\.start: .*NUL/],
      [{ end: 'b\u0000' }, /body\.end: .*NUL/],
      [{ prefix: '\u0000' }, /body\.prefix: .*NUL/],
      [{ colPrefix: 'c\u0000' }, /body\.colPrefix: .*NUL/],
      [{ after: { row: 'a\u0000', col: '' } }, /body\.after\.row: .*NUL/],
      [{ after: { row: 'a', col: '\u0000' } }, /body\.after\.col: .*NUL/],
    ];
    for (const [body, message] of scans) {
      const err = await failure(meta.call<ScanPage>('POST', '/v1/meta/scan', body, { idempotent: true }));
      expect(err.code, JSON.stringify(body)).toBe('BAD_REQUEST');
      expect(err.message).toMatch(message);
    }
    const rowErr = await failure(meta.call('POST', '/v1/meta/row', { row: 'a\u0000' }, { idempotent: true }));
    expect(rowErr.code).toBe('BAD_REQUEST');
    expect(rowErr.message).toMatch(/body\.row: .*NUL/);

    expect(await everything(meta)).toEqual(before);
  });

  it('rows - rows read in one turn share a request; each caller gets its own row; too many rows is a 400', async () => {
    const meta = await start();
    const rows = Array.from({ length: 1_500 }, (_, i) => `r${String(i).padStart(4, '0')}`);
    await mutateRaw(meta, [{ puts: rows.map((row) => ({ row, col: 'c', value: `v-${row}` })) }]);
    // 1,500 at once, one repeated and one absent: read 1,000 rows a request at most.
    const read = await Promise.all([...rows, 'r0007', 'absent'].map((r) => meta.row(r)));
    rows.forEach((row, i) => expect(Object.fromEntries(read[i]!)).toEqual({ c: `v-${row}` }));
    expect(Object.fromEntries(read[1_500]!)).toEqual({ c: 'v-r0007' });
    expect(read[1_501]!.size).toBe(0);

    const tooMany = await failure(
      meta.call('POST', '/v1/meta/rows', { rows: [...rows, ...rows] }, { idempotent: true }),
    );
    expect(tooMany.code).toBe('BAD_REQUEST');
    expect(tooMany.message).toMatch(/body\.rows/);
  });
});
