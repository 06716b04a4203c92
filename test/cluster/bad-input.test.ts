/**
 * Bad input that used to be accepted (issue 19), refused or handled against real processes: each test
 * here failed before its fix. A refusal is a 4xx (or a CLI error) naming what was wrong, and it changes
 * nothing.
 */
import { describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import { DEL_PREFIX, delRow } from '../../src/meta/keys.js';
import type { TableInfo } from '../../src/meta/views.js';
import { cliJson, cliOk } from '../support/cli.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

const PROTOTYPE_NAMES = ['constructor', 'toString', 'hasOwnProperty', 'valueOf'];

/** The error a call was refused with (fails the test when it succeeded). */
async function refusal(call: Promise<unknown>): Promise<ExcError> {
  const outcome = await call.then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  );
  if (!('err' in outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  return outcome.err as ExcError;
}

describe('bad input - names that objects inherit', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('names - `constructor` and friends are ordinary queue names, never queues that exist already', async () => {
    const c = cluster();
    await c.startManager();
    // Before: ALREADY_EXISTS: queue "constructor" already exists (id function Object() { [native code] })
    expect(await cliOk(c, ['admin', 'queue', 'create', 'constructor', '--bins', '2'])).toMatch(
      /^created queue constructor \(id [0-9a-z]{4}, 2 bins\)$/m,
    );
    const queues = await cliJson<{ name: string; bins: number }[]>(c, ['admin', 'queue', 'list']);
    expect(queues.map((q) => [q.name, q.bins])).toEqual([['constructor', 2]]);

    // A table routed to a queue that does not exist is refused, by the CLI and by the signed API alike.
    for (const name of ['toString', 'hasOwnProperty']) {
      const r = await c.cli(['admin', 'table', 'create', 't', '--config', `queues=${name}`]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`UNKNOWN_QUEUE.*no queue named "${name}"`));
    }
    const meta = await c.meta();
    for (const name of PROTOTYPE_NAMES.filter((n) => n !== 'constructor')) {
      const err = await refusal(
        meta.call('POST', '/v1/tables', { name: 't', config: { queues: [{ queue: name }] } }),
      );
      expect(err.code).toBe('UNKNOWN_QUEUE');
      expect(err.message).toContain(`"${name}"`);
      expect((await refusal(meta.call('GET', `/v1/queues/${name}`))).code).toBe('UNKNOWN_QUEUE');
    }
    expect((await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables')).tables).toEqual([]);

    // Configuring an existing table to such a queue is refused too, and leaves its config as it was.
    await meta.call('POST', '/v1/tables', { name: 'real', config: { queues: [{ queue: 'constructor' }] } });
    const err = await refusal(
      meta.call('POST', '/v1/tables/real/config', {
        config: { queues: [{ queue: 'valueOf' }], fileLimit: 2 },
      }),
    );
    expect(err.code).toBe('UNKNOWN_QUEUE');
    const { table } = await meta.call<{ table: TableInfo }>('GET', '/v1/tables/real');
    expect(table.config.queues).toEqual([{ queue: 'constructor' }]);
    expect(table.config.fileLimit).toBe(30);

    // Names outside the grammar are refused by every route with the same rule.
    for (const [method, path, body] of [
      ['POST', '/v1/queues', { name: '../q' }],
      ['POST', '/v1/tables', { name: 'a b' }],
      ['GET', '/v1/queues/__proto__', undefined],
      ['GET', '/v1/tables/__proto__', undefined],
      ['GET', '/v1/compactions?queue=%00', undefined],
    ] as const) {
      const e = await refusal(meta.call(method, path, body));
      expect(e.code, `${method} ${path}`).toBe('BAD_REQUEST');
      expect(e.message, `${method} ${path}`).toMatch(/invalid (queue|table) name ".*": letters, digits/);
    }
    // A time past what a compaction id can hold was a 500 (the id encoder threw): now it is a bad request.
    const since = await refusal(meta.call('GET', `/v1/compactions/history?since=${2 ** 48}`));
    expect(since.code).toBe('BAD_REQUEST');
    expect(since.message).toMatch(/query\.since/);
  });
});

describe('bad input - user compaction filters', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('filters - a row range or prefix that would delete every row is refused before any job is queued', async () => {
    const c = cluster();
    await c.startManager();
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 't', splits: ['g', 'p'] });
    const compactColumns = async () => {
      const cols: string[] = [];
      for await (const cell of meta.scanAll({ colPrefix: 'compact:' })) cols.push(cell.row);
      return cols;
    };
    const empty = [
      { name: 'keepRowRange', options: { start: 'm', end: 'c' } },
      { name: 'keepRowRange', options: { start: 'm', end: 'm' } },
      { name: 'keepRowRange', options: { start: 'm', end: 'm', endInclusive: true, startInclusive: false } },
      { name: 'keepRowRange', options: { start: { hex: 'ff' }, end: { hex: '00' } } },
      { name: 'keepRowRange', options: { end: '' } },
      { name: 'dropRowPrefix', options: { prefixes: ['a', ''] } },
      { name: 'keepRowPrefix', options: { prefixes: [{ hex: '' }] } },
    ];
    for (const filter of empty) {
      const err = await refusal(meta.call('POST', '/v1/tables/t/compact', { filters: [filter] }));
      expect(err.code, JSON.stringify(filter)).toBe('BAD_REQUEST');
      expect(err.message).toMatch(
        new RegExp(`filter 0 \\(${filter.name}\\): bad options: .*(range is empty|empty prefix)`),
      );
    }
    const r = await c.cli([
      'admin',
      'table',
      'compact',
      't',
      '--filter',
      'keepRowRange:{"start":"z","end":"a"}',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/keepRowRange.*the range is empty/);
    // Rows no UTF-8 can spell (a lone surrogate would become U+FFFD: other rows than the ones named).
    for (const body of [
      { startRow: 'a\ud800' },
      { endRow: '\udfff' },
      { filters: [{ name: 'dropRowPrefix', options: { prefixes: ['\ud800x'] } }] },
    ]) {
      const err = await refusal(meta.call('POST', '/v1/tables/t/compact', body));
      expect(err.code, JSON.stringify(body)).toBe('BAD_REQUEST');
      expect(err.message).toMatch(/holds a lone UTF-16 surrogate/);
    }
    expect(await compactColumns()).toEqual([]);

    // A single row (both ends inclusive) is a range, not a mistake.
    await meta.call('POST', '/v1/tables/t/compact', {
      filters: [{ name: 'keepRowRange', options: { start: 'm', end: 'm', endInclusive: true } }],
    });
    expect(await compactColumns()).toHaveLength(3);
  });
});

describe('bad input - deletion marks', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { env: { EXC_GC_GRACE_MS: '100' } });

  it('gc - a bad ~del row is skipped and reported (metric, log line, admin check); the rest is collected', async () => {
    const c = cluster();
    const manager = await c.startManager();
    const url = (await manager.waitForLog((l) => l.msg === 'manager active')).url as string;
    const store = c.store();
    const meta = await c.meta();
    const old = String(Date.now() - 60_000);
    const garbage = ['tables/0001/Igarbage1.rf', 'tables/0002/Cgarbage2.rf'];
    const outside = 'elsewhere/keep.rf';
    for (const name of [...garbage, outside]) await store.write(name, Buffer.from('x'));
    const bad = [
      ['tables/0001/../../../etc/passwd', old],
      ['tables/0001/I bad.rf', old],
      [outside, old],
      ['tables/0001/Ibadtime.rf', 'soon'],
    ];
    await meta.mutate([
      ...[...garbage.map((f) => [f, old]), ...bad].map(([file, at]) => ({
        puts: [{ row: delRow(file!), col: 'at', value: at! }],
      })),
    ]);

    const stats = await meta.call<{ lastError?: string; badMarks: number; deleted: number }>(
      'POST',
      '/v1/gc/run',
    );
    expect(stats.lastError).toBeUndefined();
    expect(stats.badMarks).toBe(bad.length);
    for (const f of garbage) expect(await store.stat(f), f).toBeNull();
    expect(await store.stat(outside)).not.toBeNull();
    const left: string[] = [];
    for await (const cell of meta.scanAll({ prefix: DEL_PREFIX }))
      left.push(cell.row.slice(DEL_PREFIX.length));
    expect(left.sort()).toEqual(bad.map(([f]) => f!).sort());

    // Reported: once in the log per row, in the metrics, and by admin check (which then exits 5).
    const warned = manager.lines.filter((l) => l.msg?.startsWith('skipping a deletion mark'));
    expect(warned.map((l) => l.row).sort()).toEqual(bad.map(([f]) => `~del:${f}`).sort());
    const again = await meta.call<{ badMarks: number }>('POST', '/v1/gc/run');
    expect(again.badMarks).toBe(bad.length);
    expect(manager.lines.filter((l) => l.msg?.startsWith('skipping a deletion mark'))).toHaveLength(
      bad.length,
    );
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^excompact_manager_gc_bad_deletion_marks\{[^}]*\} 4$/m);
    const check = await c.cli(['admin', 'check', '--json']);
    expect(check.code).toBe(5);
    const report = JSON.parse(check.stdout) as {
      problems: Record<string, { count: number; items: { row: string; problem: string }[] }>;
    };
    expect(report.problems.badDeletionMarks?.count).toBe(bad.length);
    expect(report.problems.badDeletionMarks?.items.map((i) => i.problem)).toEqual(
      expect.arrayContaining(['not a valid object name', 'not a tablet file (outside tables/)']),
    );
    const text = await c.cli(['admin', 'check']);
    expect(text.stdout).toContain('~del:elsewhere/keep.rf: not a tablet file (outside tables/)');
  });
});
