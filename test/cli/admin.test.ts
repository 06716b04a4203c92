/**
 * The `excompact` CLI end to end against a real cluster (ZooKeeper, manager, tablet server, compactors):
 * every admin command, ingest and scan, the documented exit codes and messages.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configReference } from '../../src/config.js';
import { queuePrefix } from '../../src/meta/keys.js';
import { parseTablet } from '../../src/meta/tablet.js';
import { digestAuthFromSecret, ZkSession, type ZkDigestAuth } from '../../src/zk/index.js';
import { cliJson as json, cliOk as ok } from '../support/cli.js';
import { useCluster, useProcesses, useZooKeeper, waitFor, type TestCluster } from '../support/index.js';

const COMPACTOR_BIN = fileURLToPath(new URL('../../bin/compactor.js', import.meta.url));

/** What commander adds after an argument error it catches itself, on a line of its own. */
const USAGE_HINT = '(run with --help for usage)';

/** A failed command's stderr: one line saying what was wrong (and, for argument errors, the usage hint). */
function expectOneLine(stderr: string, message: RegExp): void {
  const lines = stderr.trimEnd().split('\n');
  expect(
    lines.filter((l) => l !== USAGE_HINT),
    stderr,
  ).toHaveLength(1);
  expect(lines[0]).toMatch(message);
}

const ndjson = (entries: object[]) => entries.map((e) => JSON.stringify(e)).join('\n') + '\n';

describe('excompact CLI', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  async function running(): Promise<TestCluster> {
    await cluster().startManager();
    await cluster().startTserver();
    return cluster();
  }

  it('queues - create (again: refused, or a no-op with --if-not-exists), list, info, delete (refused while a table routes to it unless --force)', async () => {
    const c = await running();
    expect(await ok(c, ['admin', 'queue', 'create', 'small', '--bins', '4'])).toMatch(
      /created queue small \(id [0-9a-z]{4}, 4 bins\)/,
    );
    const again = await c.cli(['admin', 'queue', 'create', 'small']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/queue "small" already exists/);
    // Idempotent for provisioning scripts: it succeeds and changes nothing (the bins stay 4).
    expect(await ok(c, ['admin', 'queue', 'create', 'small', '--bins', '16', '--if-not-exists'])).toBe(
      'queue small already exists\n',
    );
    await ok(c, ['admin', 'queue', 'create', 'large', '--if-not-exists']);
    const queues = await json<
      { name: string; bins: number; queued: number; running: number; compactors: number }[]
    >(c, ['admin', 'queue', 'list']);
    expect(queues.map((q) => [q.name, q.bins, q.queued, q.running, q.compactors])).toEqual([
      ['large', 8, 0, 0, 0],
      ['small', 4, 0, 0, 0],
    ]);
    expect(await ok(c, ['admin', 'queue', 'list'])).toMatch(
      /NAME\s+ID\s+BINS\s+QUEUED\s+RUNNING\s+COMPACTORS\nlarge/,
    );

    await ok(c, ['admin', 'table', 'create', 'events', '--config', 'queues=small:64M,large']);
    await c.startCompactor('small');
    const info = await json<{ queue: { name: string }; compactors: { path: string }[] }>(c, [
      'admin',
      'queue',
      'info',
      'small',
    ]);
    expect(info.queue.name).toBe('small');
    expect(info.compactors).toHaveLength(1);
    expect(await ok(c, ['admin', 'queue', 'info', 'small'])).toMatch(/compactors \(1\):/);

    const refused = await c.cli(['admin', 'queue', 'delete', 'small']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/queue small is used by table events/);
    expect(await ok(c, ['admin', 'queue', 'delete', 'small', '--force'])).toMatch(
      /deleted queue small[\s\S]*still routing to it: events/,
    );
    expect((await json<{ name: string }[]>(c, ['admin', 'queue', 'list'])).map((q) => q.name)).toEqual([
      'large',
    ]);
  });

  it('queues - two concurrent creates of the same name end with exactly one queue', async () => {
    const c = await running();
    for (let round = 0; round < 3; round++) {
      const name = `race${round}`;
      const results = await Promise.all([1, 2, 3].map(() => c.cli(['admin', 'queue', 'create', name])));
      expect(results.filter((r) => r.code === 0)).toHaveLength(1);
      for (const r of results.filter((x) => x.code !== 0)) {
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`queue "${name}" already exists`));
      }
    }
    expect((await json<{ name: string }[]>(c, ['admin', 'queue', 'list'])).map((q) => q.name)).toEqual([
      'race0',
      'race1',
      'race2',
    ]);
  });

  it('queue delete with live compactors - they exit, reservations are cancelled, entries go, nothing else is touched', async () => {
    const c = await running();
    await ok(c, ['admin', 'queue', 'create', 'doomed']);
    await ok(c, ['admin', 'queue', 'create', 'kept']);
    // Uncompressed (here and below): these tests time throttled compactions by bytes and rely on equal
    // batches making files of equal size, which only uncompressed files are.
    await ok(c, [
      'admin',
      'table',
      'create',
      'a',
      '--config',
      'queues=doomed',
      '--config',
      'compression=none',
    ]);
    await ok(c, ['admin', 'table', 'create', 'b', '--config', 'queues=kept', '--config', 'compression=none']);
    const busy = await c.startCompactor('doomed', { args: ['--throughput', '20000'] });
    for (let i = 0; i < 3; i++) {
      const batch = ndjson(
        Array.from({ length: 300 }, (_, j) => ({ row: `r${j}`, ts: 10 + i, value: 'x'.repeat(100) })),
      );
      await ok(c, ['ingest', 'a'], batch);
      await ok(c, ['ingest', 'b'], batch);
    }
    await busy.waitForLog((l) => l.msg === 'compaction started');
    const meta = await c.meta();
    const kept = (
      await json<{ name: string; id: string; queued: number }[]>(c, ['admin', 'queue', 'list'])
    ).find((q) => q.name === 'kept')!;
    expect(kept.queued).toBe(1);

    await ok(c, ['admin', 'queue', 'delete', 'doomed', '--force']);
    expect((await busy.waitExit(15_000)).code).toBe(4);
    const tabletA = (await json<{ tablets: { tablet: string }[] }>(c, ['admin', 'table', 'info', 'a']))
      .tablets[0]!.tablet;
    await waitFor(
      async () => parseTablet(tabletA, await meta.row(tabletA)).reservations.size === 0,
      'reservation cancelled',
    );
    expect(parseTablet(tabletA, await meta.row(tabletA)).files.size).toBe(3);
    const remaining = [];
    for await (const cell of meta.scanAll({ prefix: '~cq:' })) remaining.push(cell.row);
    expect(remaining).toHaveLength(1);
    expect(remaining[0]!.startsWith(queuePrefix(kept.id))).toBe(true);
    expect((await ok(c, ['scan', 'b'])).trim().split('\n')).toHaveLength(300);
  });

  it('tables and data - create (again with --if-not-exists: a no-op) with splits and config, ingest (file and stdin), scan, info, config, delete', async () => {
    const c = await running();
    await ok(c, ['admin', 'table', 'create', 'events', '--splits', 'g,p', '--config', 'versions=2']);
    const again = await c.cli(['admin', 'table', 'create', 'events']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/table "events" already exists/);
    expect(
      await ok(c, [
        'admin',
        'table',
        'create',
        'events',
        '--split',
        'x',
        '--config',
        'versions=5',
        '--if-not-exists',
      ]),
    ).toBe('table events already exists\n');
    const file = join(c.dataDir, 'in.ndjson');
    const t0 = Date.now() - 60_000; // recent: the ttl set below must not age these off
    writeFileSync(
      file,
      ndjson([
        { row: 'a', cf: 'f', cq: 'q', ts: t0 + 1, value: 'old' },
        { row: 'a', cf: 'f', cq: 'q', ts: t0 + 2, value: 'new' },
        { row: 'h', value: 'x', ts: t0 + 5 },
      ]),
    );
    expect(await ok(c, ['ingest', 'events', file])).toMatch(/ingested 3 entries into events/);
    await ok(
      c,
      ['ingest', 'events'],
      ndjson([
        {
          row: Buffer.from('z').toString('base64'),
          value: Buffer.from([0xff, 0]).toString('base64'),
          encoding: 'base64',
          ts: t0 + 9,
        },
        { row: 'h', delete: true, ts: t0 + 6 },
      ]),
    );

    const lines = (await ok(c, ['scan', 'events']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([
      { row: 'a', cf: 'f', cq: 'q', ts: t0 + 2, value: 'new' },
      { row: 'a', cf: 'f', cq: 'q', ts: t0 + 1, value: 'old' },
      { row: 'eg==', cf: '', cq: '', ts: t0 + 9, value: '/wA=', encoding: 'base64' },
    ]);
    expect((await ok(c, ['scan', 'events', '--start', 'b', '--end', 'y'])).trim()).toBe('');
    expect((await ok(c, ['scan', 'events', '--limit', '1'])).trim().split('\n')).toHaveLength(1);

    const info = await json<{ table: { config: { versions: number } }; tablets: { files: unknown[] }[] }>(c, [
      'admin',
      'table',
      'info',
      'events',
    ]);
    expect(info.tablets.map((t) => t.files.length)).toEqual([1, 2, 1]);
    expect(info.table.config.versions).toBe(2); // as created: the --if-not-exists run changed nothing
    expect(await ok(c, ['admin', 'table', 'info', 'events'])).toMatch(/TABLET\s+END ROW\s+HOST\s+FILES/);
    await ok(c, ['admin', 'table', 'config', 'events', 'versions=1', 'ttl=30d']);
    const tables = await json<{ name: string; config: { versions: number; ttlMs: number } }[]>(c, [
      'admin',
      'table',
      'list',
    ]);
    expect(tables[0]!.config).toMatchObject({ versions: 1, ttlMs: 30 * 86_400_000 });
    expect((await ok(c, ['scan', 'events'])).trim().split('\n')).toHaveLength(2);
    await ok(c, ['admin', 'table', 'delete', 'events']);
    expect(await json<unknown[]>(c, ['admin', 'table', 'list'])).toEqual([]);
  });

  it('user compaction with a filter removes exactly what the filter says, and --wait returns when done; with --start/--end only the tablets in range', async () => {
    const c = await running();
    await ok(c, ['admin', 'queue', 'create', 'q']);
    await ok(c, ['admin', 'table', 'create', 't', '--splits', 'm', '--config', 'queues=q']);
    await c.startCompactor('q');
    const rows = ['a1', 'tmp_a', 'b2', 'tmp_b', 'n1', 'tmp_n', 'z9'];
    await ok(c, ['ingest', 't'], ndjson(rows.map((row, i) => ({ row, value: `v${i}`, ts: 100 }))));
    await ok(c, ['ingest', 't'], ndjson([{ row: 'a1', cf: 'x', value: 'second', ts: 101 }]));

    const out = await ok(c, [
      'admin',
      'table',
      'compact',
      't',
      '--filter',
      'dropRowPrefix:{"prefixes":["tmp_"]}',
      '--wait',
    ]);
    expect(out).toMatch(/2\/2 tablets done/);
    const scanRows = async (): Promise<string[]> =>
      (await ok(c, ['scan', 't']))
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { row: string }).row);
    expect(await scanRows()).toEqual(['a1', 'a1', 'b2', 'n1', 'z9']);
    const info = await json<{ tablets: { tablet: string; files: unknown[] }[] }>(c, [
      'admin',
      'table',
      'info',
      't',
    ]);
    expect(info.tablets.map((t) => t.files.length)).toEqual([1, 1]);

    // A range after the split touches the second tablet only: the filter runs there alone, and --wait
    // returns once that tablet is done (the first one, left with two files, is never compacted).
    await ok(
      c,
      ['ingest', 't'],
      ndjson([
        { row: 'd_1', value: 'w', ts: 102 },
        { row: 'p_1', value: 'w', ts: 102 },
      ]),
    );
    const ranged = await json<{ tablets: string[]; done: boolean }>(c, [
      'admin',
      'table',
      'compact',
      't',
      '--start',
      'n',
      '--end',
      'z',
      '--filter',
      'dropRowPrefix:{"prefixes":["d_","p_"]}',
      '--wait',
    ]);
    expect(ranged).toMatchObject({ tablets: [info.tablets[1]!.tablet], done: true });
    expect(await scanRows()).toEqual(['a1', 'a1', 'b2', 'd_1', 'n1', 'z9']);
    const after = await json<{ tablets: { files: unknown[] }[] }>(c, ['admin', 'table', 'info', 't']);
    expect(after.tablets.map((t) => t.files.length)).toEqual([2, 1]);
  });

  it('compactors and compactions - list, cancel, release a parked job', async () => {
    const c = await running();
    await ok(c, ['admin', 'queue', 'create', 'q']);
    await ok(c, [
      ...['admin', 'table', 'create', 't', '--config', 'queues=q'],
      ...['--config', 'maxAttempts=1', '--config', 'compression=none'],
    ]);
    const slow = await c.startCompactor('q', { args: ['--throughput', '10000'] });
    for (let i = 0; i < 3; i++)
      await ok(
        c,
        ['ingest', 't'],
        ndjson(Array.from({ length: 200 }, (_, j) => ({ row: `r${j}`, ts: i, value: 'x'.repeat(100) }))),
      );
    await slow.waitForLog((l) => l.msg === 'compaction started');

    const compactors = await json<{ queue: string; path: string; pid: number }[]>(c, [
      'admin',
      'compactors',
      'list',
    ]);
    expect(compactors).toHaveLength(1);
    expect(compactors[0]!.pid).toBe(slow.pid);
    const { running: list } = await json<{ running: { ecid: string; compactor: string }[] }>(c, [
      'admin',
      'compactions',
      'list',
    ]);
    expect(list).toHaveLength(1);
    expect(list[0]!.compactor).toBe(compactors[0]!.path);
    expect(await ok(c, ['admin', 'compactions', 'list'])).toMatch(/running \(1\):[\s\S]*parked \(0\):/);

    // An admin cancel counts as no failure: the job is requeued, and the compactor's commit is refused.
    expect(await ok(c, ['admin', 'compactions', 'cancel', list[0]!.ecid])).toMatch(/cancelled/);
    await slow.waitForLog(
      (l) => l.msg === 'compaction abandoned' || /reservation (was|is being) cancelled/.test(String(l.msg)),
      20_000,
    );
    slow.kill();
    // The slow compactor may have reserved the requeued job again before it died: that death counts as a
    // failed attempt and (maxAttempts=1) parks the job. Start from a clean slate.
    const meta = await c.meta();
    const tablet = (await json<{ tablets: { tablet: string }[] }>(c, ['admin', 'table', 'info', 't']))
      .tablets[0]!.tablet;
    await waitFor(
      async () => parseTablet(tablet, await meta.row(tablet)).reservations.size === 0,
      'no reservation',
    );
    await ok(c, ['admin', 'compactions', 'release', '--table', 't']);

    // A job failing once (maxAttempts=1) is parked: a corrupt input makes sure it fails.
    const files = [...parseTablet(tablet, await meta.row(tablet)).files.keys()];
    writeFileSync(join(c.storePath, files[0]!), 'not an rfile');
    await c.startCompactor('q');
    const parked = await waitFor(async () => {
      const r = await json<{ parked: { id: string; lastError: string }[] }>(c, [
        'admin',
        'compactions',
        'list',
        '--state',
        'parked',
      ]);
      return r.parked[0];
    }, 'a parked job');
    expect(parked.lastError).toContain(files[0]);
    expect(await ok(c, ['admin', 'compactions', 'release', parked.id])).toMatch(/released 1 parked job/);
    // Released, it is tried (and parked) again.
    await waitFor(
      async () =>
        (await json<{ parked: unknown[] }>(c, ['admin', 'compactions', 'list', '--state', 'parked'])).parked
          .length === 1,
      'parked again',
    );
    expect(await ok(c, ['admin', 'compactions', 'release', '--table', 't'])).toMatch(/released 1 parked job/);
  });

  it('compactors and compactions - --queue and --table narrow the lists', async () => {
    const c = await running();
    for (const [queue, table] of [
      ['q', 't'],
      ['r', 'u'],
    ] as const) {
      await ok(c, ['admin', 'queue', 'create', queue]);
      await ok(c, [
        'admin',
        'table',
        'create',
        table,
        '--config',
        `queues=${queue}`,
        '--config',
        'compression=none',
      ]);
    }
    // So slow that both jobs still run when the test ends.
    const onQ = await c.startCompactor('q', { name: 'on-q', args: ['--throughput', '2000'] });
    const onR = await c.startCompactor('r', { name: 'on-r', args: ['--throughput', '2000'] });
    for (let i = 0; i < 3; i++) {
      const batch = ndjson(
        Array.from({ length: 200 }, (_, j) => ({ row: `r${j}`, ts: i, value: 'x'.repeat(100) })),
      );
      await ok(c, ['ingest', 't'], batch);
      await ok(c, ['ingest', 'u'], batch);
    }
    await onQ.waitForLog((l) => l.msg === 'compaction started');
    await onR.waitForLog((l) => l.msg === 'compaction started');

    type Compactor = { queue: string; pid: number };
    const compactors = (...filter: string[]) =>
      json<Compactor[]>(c, ['admin', 'compactors', 'list', ...filter]);
    expect((await compactors()).map((x) => x.pid).sort()).toEqual([onQ.pid, onR.pid].sort());
    expect((await compactors('--queue', 'r')).map((x) => [x.queue, x.pid])).toEqual([['r', onR.pid]]);

    type Running = { table: string; queue: string; compactor: string };
    const compactions = async (...filter: string[]) =>
      (await json<{ running: Running[] }>(c, ['admin', 'compactions', 'list', ...filter])).running.map(
        (r) => [r.table, r.queue, r.compactor],
      );
    expect(await compactions()).toHaveLength(2);
    expect(await compactions('--queue', 'q')).toEqual([['t', 'q', onQ.compactor]]);
    expect(await compactions('--table', 'u')).toEqual([['u', 'r', onR.compactor]]);
    expect(await compactions('--queue', 'q', '--table', 'u')).toEqual([]);
  });

  it('health and config - health asks a process by port (exit 2 when nothing answers); config prints the reference and the ZooKeeper digest', async () => {
    const c = cluster();
    await c.startManager();
    const tserver = await c.startTserver();
    const port = tserver.server.split(':')[1]!;
    const healthy = await c.cli(['health', '--port', port]);
    expect(healthy.code, healthy.stderr).toBe(0);
    expect(JSON.parse(healthy.stdout)).toEqual({ ok: true, state: 'serving' });
    // Without --port it asks EXC_PORT, the port a container's process was given.
    const byEnv = await c.cli(['health'], { env: { EXC_PORT: port } });
    expect(byEnv.code, byEnv.stderr).toBe(0);
    tserver.kill();
    await tserver.waitExit();
    const down = await c.cli(['health', '--port', port]);
    expect(down.code).toBe(2);
    expectOneLine(down.stderr, new RegExp(`UNAVAILABLE: http://127\\.0\\.0\\.1:${port}/healthz`));

    expect(await ok(c, ['config', '--docs'])).toBe(`${configReference()}\n`);
    expect(await ok(c, ['config'])).toBe(`${configReference()}\n`);
    // The digest is what zkCli.sh's `addauth digest` needs: with it the instance's nodes can be read,
    // without it they cannot.
    const digest = (await ok(c, ['config', '--zk-digest'])).trim();
    const auth = digestAuthFromSecret(c.secret);
    expect(digest).toBe(`${auth.user}:${auth.password}`);
    const readQueues = async (withAuth?: ZkDigestAuth): Promise<string[]> => {
      const session = await ZkSession.connect({
        connectString: c.zk.connectString,
        sessionTimeoutMs: 5_000,
        ...(withAuth ? { auth: withAuth } : {}),
      });
      try {
        return await session.children(c.layout.queues);
      } finally {
        await session.close();
      }
    };
    const [user, password] = digest.split(':') as [string, string];
    await expect(readQueues({ user, password })).resolves.toEqual([]);
    await expect(readQueues()).rejects.toMatchObject({ code: 'ZK_NO_AUTH' });
  });

  it('errors - bad arguments and unknown names exit 1 with a one-line message; an unreachable cluster exits 2 saying what was tried', async () => {
    const c = await running();
    const cases: [string[], number, RegExp][] = [
      [['admin', 'queue', 'info', 'nope'], 1, /no queue named "nope"/],
      [['admin', 'queue', 'create', 'bad name'], 1, /invalid queue name "bad name"/],
      [['admin', 'queue', 'create', 'q', '--bins', '0'], 1, /--bins must be an integer from 1 to 4096/],
      [['admin', 'table', 'info', 'nope'], 1, /no table named "nope"/],
      [['admin', 'table', 'create', 't', '--splits', 'b,a'], 1, /split points must be sorted/],
      [['admin', 'table', 'create', 't', '--config', 'colour=blue'], 1, /unknown table setting "colour"/],
      [
        ['admin', 'table', 'compact', 'nope', '--filter', 'dropRowPrefix:{bad'],
        1,
        /options are not valid JSON/,
      ],
      [['admin', 'compactions', 'list', '--state', 'sleeping'], 1, /--state must be running or parked/],
      [['scan', 'nope'], 1, /no table named "nope"/],
      [['admin', 'bogus'], 1, /unknown command 'bogus'/],
    ];
    for (const [args, code, message] of cases) {
      const r = await c.cli(args);
      expect(r.code, args.join(' ')).toBe(code);
      expectOneLine(r.stderr, message);
    }
    const badIngest = await c
      .cli(['admin', 'table', 'create', 't'])
      .then(() => c.cli(['ingest', 't'], { input: '{"row":"a"}\n{"row":5}\n' }));
    expect(badIngest.code).toBe(1);
    expectOneLine(badIngest.stderr, /line 2: row: /);
    expect((await ok(c, ['scan', 't'])).trim()).toBe(''); // nothing of the valid first line was written
    // Text the table could not hold exactly (it would be stored as U+FFFD, or as other bytes) is refused
    // the same way, naming the line: nothing is written.
    const latin1 = join(c.dataDir, 'latin1.ndjson');
    writeFileSync(
      latin1,
      Buffer.concat([Buffer.from('{"row":"a"}\n{"row":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]),
    );
    const unstorable: [string[], string | undefined, RegExp][] = [
      [['ingest', 't', latin1], undefined, /line 2: not UTF-8 \(byte 12\)/],
      [
        ['ingest', 't'],
        '{"row":"a"}\n{"row":"b","value":"x\\ud800"}\n',
        /line 2: value holds a lone UTF-16 surrogate \(character 2\)/,
      ],
      [
        ['ingest', 't'],
        '{"row":"YQ==","encoding":"base64"}\n{"row":"YQ==YQ==","encoding":"base64"}\n',
        /line 2: row: not base64/,
      ],
    ];
    for (const [args, input, message] of unstorable) {
      const r = await c.cli(args, input === undefined ? {} : { input });
      expect(r.code, args.join(' ')).toBe(1);
      expectOneLine(r.stderr, message);
    }
    expect((await ok(c, ['scan', 't'])).trim()).toBe('');

    const unreachable = await c.cli(['admin', 'queue', 'list', '--zk', '127.0.0.1:1']);
    expect(unreachable.code).toBe(2);
    expectOneLine(unreachable.stderr, /cannot reach ZooKeeper at 127\.0\.0\.1:1/);
    // A monitor port in use is the user's to change: exit 1 naming the port, not 2 (unreachable).
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const port = (busy.address() as AddressInfo).port;
      const monitor = await c.cli(['monitor', '--port', String(port)]);
      expect(monitor.code, monitor.stderr).toBe(1);
      expectOneLine(
        monitor.stderr,
        new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use`),
      );
    } finally {
      busy.close();
    }
    const noSecret = await c.cli(['admin', 'queue', 'list'], { env: { EXC_SECRET: undefined } });
    expect(noSecret.code).toBe(1);
    expectOneLine(noSecret.stderr, /no instance secret/);
    // The standalone `compactor` command (package.json bin) for a queue that does not exist: it stops at
    // once, exit 1, with one plain line naming the queue beside its JSON log.
    const compactor = await procs.spawn('compactor-bin', process.execPath, [COMPACTOR_BIN, 'nope'], {
      env: c.env(),
    });
    expect(await compactor.waitExit(30_000)).toEqual({ code: 1, signal: null });
    expect(compactor.lines.filter((l) => l.level === undefined).map((l) => l.msg)).toEqual([
      'excompact: UNKNOWN_QUEUE: no queue named "nope"',
    ]);
    const help = await c.cli(['admin', 'table', 'compact', '--help']);
    expect(help.stdout).toMatch(/Examples:/);
  });
});
