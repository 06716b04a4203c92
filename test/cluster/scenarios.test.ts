/**
 * Cluster scenarios: the topology of docker-compose.yml (ZooKeeper, an S3 server, a manager, tablet
 * servers, compactor pools per queue) as real processes on loopback, driven through the CLI where an
 * operator would use it. After every scenario the invariants are checked: exact data, no reservation of a
 * dead compactor, queue entries that match the work, and no unreferenced file after garbage collection.
 * The reservation and queue-entry invariants are also checked mid-scenario, when a compactor has just died
 * or work is waiting: once a scenario is over there are no reservations or entries left to check.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import type { MetaClient } from '../../src/meta/client.js';
import { parseTablet } from '../../src/meta/tablet.js';
import type { RunningCompaction } from '../../src/meta/views.js';
import { openObjectStore, type ObjectStore } from '../../src/storage/index.js';
import {
  DataModel,
  checkInvariants,
  checkNoDeadReservations,
  checkQueueEntriesHaveWork,
  useCluster,
  usePostgres,
  useProcesses,
  useS3,
  useZooKeeper,
  waitFor,
  type CompactorProcess,
  type TestCluster,
  type TserverProcess,
} from '../support/index.js';
import { cliJson, cliOk } from '../support/cli.js';

const GRACE_MS = 1_000;
const SMALL_LIMIT = 50_000; // "256M", scaled down: jobs with more input go to size256M

interface Env {
  cluster: TestCluster;
  meta: MetaClient;
  client: ExcClient;
  store: ObjectStore;
  model: DataModel;
  tservers: TserverProcess[];
}

/** What `admin queue info --json` prints (the parts these scenarios look at). */
interface QueueInfo {
  queued: { table: string; tablet: string }[];
  running: RunningCompaction[];
}

let clock = 1_000_000;
function rows(prefix: string, n: number, valueBytes = 100) {
  const ts = clock++;
  return Array.from({ length: n }, (_, i) => ({
    row: `${prefix}${String(i).padStart(5, '0')}`,
    cf: 'f',
    cq: 'q',
    ts,
    value: `${ts}`.padEnd(valueBytes, 'x'),
  }));
}

// Every scenario with the metadata store on each backend: SQLite (the default) and PostgreSQL.
describe.each(['sqlite', 'postgres'] as const)('cluster scenarios, metadata on %s', (backend) => {
  const zk = useZooKeeper();
  const s3 = useS3();
  const pg = backend === 'postgres' ? usePostgres() : undefined;
  const procs = useProcesses();
  let metaUrl: string | undefined;
  beforeEach(async () => {
    metaUrl = pg ? await pg().freshDatabase() : undefined;
  });
  const cluster = useCluster(zk, procs, {
    env: () => ({
      ...s3().env,
      EXC_GC_GRACE_MS: String(GRACE_MS),
      ...(metaUrl ? { EXC_META: metaUrl } : {}),
    }),
  });

  async function start(
    options: { tservers?: number; splits?: string; balance?: boolean } = {},
  ): Promise<Env> {
    const c = cluster();
    await c.startManager(options.balance === false ? { env: { EXC_BALANCE_MOVES: '0' } } : {});
    const tservers: TserverProcess[] = [];
    for (let i = 0; i < (options.tservers ?? 2); i++)
      tservers.push(await c.startTserver({ name: `tserver-${i + 1}` }));
    await cliOk(c, ['admin', 'store', 'init']);
    await cliOk(c, ['admin', 'queue', 'create', 'small']);
    await cliOk(c, ['admin', 'queue', 'create', 'size256M']);
    await cliOk(c, [
      'admin',
      'table',
      'create',
      'TABLE1',
      '--splits',
      options.splits ?? 'm',
      '--config',
      `queues=small:${SMALL_LIMIT},size256M`,
      // Uncompressed: the scenarios route jobs by input size and time throttled compactions by bytes.
      '--config',
      'compression=none',
    ]);
    const meta = await c.meta();
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger(), moveTimeoutMs: 30_000 });
    await waitFor(async () => (await client.tablets('TABLE1')).every((t) => t.loc), 'tablets hosted');
    const store = openObjectStore({
      store: s3().storeUrl,
      s3Endpoint: s3().endpoint,
      s3Region: 'us-east-1',
      s3AccessKeyId: s3().accessKeyId,
      s3SecretAccessKey: s3().secretAccessKey,
      s3ForcePathStyle: true,
    });
    return { cluster: c, meta, client, store, model: new DataModel(), tservers };
  }

  /** Writes through `excompact ingest` (NDJSON on stdin), as an operator loading data would. */
  async function ingest(env: Env, entries: ReturnType<typeof rows>): Promise<void> {
    env.model.write(entries);
    await cliOk(env.cluster, ['ingest', 'TABLE1'], entries.map((e) => JSON.stringify(e)).join('\n') + '\n');
  }

  /** Waits until the compactor's ZooKeeper node is gone: its session has expired. */
  async function nodeGone(env: Env, compactor: CompactorProcess): Promise<void> {
    const session = await env.cluster.session();
    await waitFor(
      async () => !(await session.exists(compactor.compactor)),
      `the node of ${compactor.name} to go`,
      env.cluster.sessionTimeoutMs + 10_000,
    );
  }

  /** Big batches: three of them make a job over the small limit, routed to size256M. */
  async function bigJob(env: Env, prefix = 'a'): Promise<void> {
    for (let i = 0; i < 3; i++) await ingest(env, rows(`${prefix}${i}-`, 200, 200));
  }

  async function finish(env: Env): Promise<void> {
    await waitFor(
      async () => {
        const entries = [];
        for await (const c of env.meta.scanAll({ prefix: '~cq:', limit: 1 })) entries.push(c);
        const tablets = await env.client.tablets('TABLE1');
        return entries.length === 0 && tablets.every((t) => t.reservations.length === 0);
      },
      'compactions to finish',
      60_000,
      100,
    );
    await checkInvariants(env.cluster, {
      meta: env.meta,
      client: env.client,
      store: env.store,
      models: { TABLE1: env.model },
    });
    await env.store.close();
  }

  it('example 1 - a queue for big jobs, its compactor, a table routed to it; ingest, compact, commit', async () => {
    const env = await start();
    const c = env.cluster;
    await c.startCompactor('small');
    // The job waits in size256M until a compactor for it starts, and the queue entry agrees with the tablet.
    await bigJob(env);
    const waiting = await waitFor(async () => {
      const info = await cliJson<QueueInfo>(c, ['admin', 'queue', 'info', 'size256M']);
      return info.queued.length > 0 && info;
    }, 'the job to be queued');
    expect(waiting.queued.map((q) => q.table)).toEqual(['TABLE1']);
    expect(await checkQueueEntriesHaveWork(c, env.meta)).toBe(1);

    // Slow enough to be seen running through the CLI.
    const big = await c.startCompactor('size256M', { args: ['--throughput', '20000'] });
    const running = await waitFor(
      async () =>
        (
          await cliJson<{ running: RunningCompaction[] }>(c, [
            'admin',
            'compactions',
            'list',
            '--queue',
            'size256M',
          ])
        ).running[0],
      'the compaction to show as running',
    );
    expect(running).toMatchObject({ table: 'TABLE1', queue: 'size256M', compactor: big.compactor });
    const committed = await big.waitForLog((l) => l.msg === 'compaction committed', 30_000);
    expect(committed.ecid).toBe(running.ecid);
    await waitFor(async () => {
      const info = await cliJson<QueueInfo>(c, ['admin', 'queue', 'info', 'size256M']);
      return info.queued.length === 0 && info.running.length === 0;
    }, 'size256M to be idle');
    const queues = await cliJson<{ name: string; compactors: number }[]>(env.cluster, [
      'admin',
      'queue',
      'list',
    ]);
    expect(queues.map((q) => [q.name, q.compactors])).toEqual([
      ['size256M', 1],
      ['small', 1],
    ]);
    await finish(env);
    const info = await cliJson<{ tablets: { files: unknown[] }[] }>(env.cluster, [
      'admin',
      'table',
      'info',
      'TABLE1',
    ]);
    expect(info.tablets.map((t) => t.files.length)).toEqual([1, 0]);
  });

  it('example 2 - the compactor dies mid-compaction: cancelled, requeued, done by another', async () => {
    const env = await start();
    const doomed = await env.cluster.startCompactor('size256M', {
      name: 'doomed',
      args: ['--throughput', '40000'],
    });
    await bigJob(env);
    await doomed.waitForLog((l) => l.msg === 'compaction started');
    const heir = await env.cluster.startCompactor('size256M', { name: 'heir' });
    const { running } = await cliJson<{ running: RunningCompaction[] }>(env.cluster, [
      'admin',
      'compactions',
      'list',
    ]);
    expect(running.map((r) => r.compactor)).toEqual([doomed.compactor]);
    doomed.kill();
    // Once its node is gone, its reservation must not outlast the tablet server's notice.
    await nodeGone(env, doomed);
    await checkNoDeadReservations(env.cluster, env.meta);
    await heir.waitForLog((l) => l.msg === 'compaction committed', env.cluster.sessionTimeoutMs + 20_000);
    await finish(env);
  });

  it('a tablet server killed with running compactions: tablets reassigned, reservations loaded, commits go to the new host', async () => {
    const env = await start({ tservers: 1, splits: 'm', balance: false });
    // The heir is up before the work starts (balancing is off: no tablet moves onto it), so the kill can
    // follow the reservations at once. Both jobs share 30 kB/s: they take seconds, long past the kill.
    const heir = await env.cluster.startTserver({ name: 'heir' });
    const compactor = await env.cluster.startCompactor('size256M', {
      args: ['--throughput', '30000', '--concurrency', '2'],
    });
    for (let i = 0; i < 3; i++) await ingest(env, [...rows(`a${i}-`, 150, 200), ...rows(`x${i}-`, 150, 200)]);
    const reserved = await waitFor(async () => {
      const tablets = await env.client.tablets('TABLE1');
      return tablets.every((t) => t.reservations.length === 1) && tablets;
    }, 'both tablets reserved');

    env.tservers[0]!.kill();
    expect(compactor.lines.filter((l) => l.msg === 'compaction committed')).toEqual([]);
    await waitFor(
      async () => (await env.client.tablets('TABLE1')).every((t) => t.loc?.server === heir.server),
      'reassignment',
      env.cluster.sessionTimeoutMs + 15_000,
    );
    // The reservations survived the move, and both commits reach the heir.
    for (const t of reserved) {
      const ecid = t.reservations[0]!.ecid;
      const loaded = await heir.waitForLog((l) => l.msg === 'tablet loaded' && l.tablet === t.tablet);
      expect(loaded.reservations).toBe(1);
      await heir.waitForLog((l) => l.msg === 'committed' && l.tablet === t.tablet && l.ecid === ecid, 60_000);
      await compactor.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === ecid);
    }
    expect(env.tservers[0]!.lines.filter((l) => l.msg === 'committed')).toEqual([]);
    for (const t of await env.client.tablets('TABLE1')) expect(t.files.length).toBe(1);
    await finish(env);
  });

  it('a zombie compactor (SIGSTOP past its session, SIGCONT) cannot commit; another does the job', async () => {
    const env = await start();
    const zombie = await env.cluster.startCompactor('size256M', {
      name: 'zombie',
      args: ['--throughput', '40000'],
    });
    await bigJob(env);
    const started = await zombie.waitForLog((l) => l.msg === 'compaction started');
    zombie.pause();
    const heir = await env.cluster.startCompactor('size256M', { name: 'heir' });
    // Frozen past its session, it is dead to the cluster: its reservation goes like a dead one's.
    await nodeGone(env, zombie);
    await checkNoDeadReservations(env.cluster, env.meta);
    await heir.waitForLog((l) => l.msg === 'compaction committed', env.cluster.sessionTimeoutMs + 20_000);
    zombie.resume();
    // It learns that its session is gone; whatever it tries with the old job is refused.
    await zombie.waitForLog(
      (l) => l.msg === 'registration lost: stopping its jobs and registering again',
      20_000,
    );
    await zombie.waitForLog(
      (l) => l.ecid === started.ecid && /not committing|commit rejected|abandoned|failed/.test(String(l.msg)),
      30_000,
    );
    expect(zombie.lines.some((l) => l.ecid === started.ecid && l.msg === 'compaction committed')).toBe(false);
    await finish(env);
  });

  it('queue deletion with running compactors: they exit, reservations are cancelled, the rest goes on', async () => {
    const env = await start();
    const big = await env.cluster.startCompactor('size256M', { args: ['--throughput', '40000'] });
    const small = await env.cluster.startCompactor('small');
    await bigJob(env);
    await big.waitForLog((l) => l.msg === 'compaction started');
    await cliOk(env.cluster, ['admin', 'queue', 'delete', 'size256M', '--force']);
    expect((await big.waitExit(20_000)).code).toBe(4);
    // No entry is left for the deleted queue, and none for small: every job is routed to size256M still.
    expect(await checkQueueEntriesHaveWork(env.cluster, env.meta)).toBe(0);
    await cliOk(env.cluster, ['admin', 'table', 'config', 'TABLE1', `queues=small`]);
    // With every job routed to small now, the small pool does the work.
    await small.waitForLog((l) => l.msg === 'compaction committed', 30_000);
    const tablet = (await env.client.tablets('TABLE1'))[0]!.tablet;
    await waitFor(
      async () => parseTablet(tablet, await env.meta.row(tablet)).files.size === 1,
      'compacted by small',
      30_000,
    );
    await finish(env);
  });
});
