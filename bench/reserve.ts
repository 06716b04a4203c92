/**
 * bench/reserve: the reservation protocol through one tablet server and the manager.
 *
 *   npx tsx bench/reserve.ts [--tablets 100] [--files 100] [--compactors 16] [--trials 90]
 *
 * 1. Reserve+commit cycles per second: `--compactors` compactors (real ZooKeeper nodes) reserve jobs on
 *    `--tablets` tablets and commit them at once with an empty output (trivial compactions: the protocol
 *    alone — node check and watch, late-bound selection, two conditional mutations with queue updates —
 *    without file I/O). Each tablet starts with `--files` files registered in its metadata row (the files
 *    themselves are never read: empty outputs need no inputs), and ratio 1 with two files per job gives
 *    files/2 jobs per tablet. Beside it: an authenticated no-op round trip to the same tablet server from
 *    as many clients.
 * 2. Cancel latency: a compactor holding a reservation closes its session (its node disappears); the time
 *    until the tablet's entry is back in the queue, seen by a compactor long-polling the manager for work.
 *    `--trials` times (at most 99: each dead compactor counts as a failed attempt of the job, which is
 *    parked after the table's maxAttempts, here 100); p50/p99.
 */
import { parseArgs } from 'node:util';
import { fileCol } from '../src/meta/tablet.js';
import type { ReservedJob } from '../src/queue/protocol.js';
import type { TabletView } from '../src/meta/views.js';
import { ZkSession, createProtected, digestAuthFromSecret } from '../src/zk/index.js';
import { fmt, percentile, printRows, startBenchCluster, throughput } from './lib.js';

const { values } = parseArgs({
  options: {
    tablets: { type: 'string', default: '100' },
    files: { type: 'string', default: '100' },
    compactors: { type: 'string', default: '16' },
    trials: { type: 'string', default: '90' },
  },
});
const tabletCount = Number(values.tablets);
const fileCount = Number(values.files);
const compactorCount = Number(values.compactors);
const trials = Number(values.trials);

const cluster = await startBenchCluster({ sessionTimeoutMs: 4_000 });
try {
  await cluster.start('manager', ['manager'], 'manager active');
  const meta = cluster.meta;
  const cycleQueue = await meta.call<{ id: string; bins: number }>('POST', '/v1/queues', {
    name: 'cycles',
    bins: 8,
  });
  const cancelQueue = await meta.call<{ id: string; bins: number }>('POST', '/v1/queues', {
    name: 'cancels',
    bins: 1,
  });
  const splits = Array.from({ length: tabletCount - 1 }, (_, i) => `t${String(i).padStart(5, '0')}`);
  await meta.call('POST', '/v1/tables', {
    name: 'cycles',
    splits,
    config: { queues: [{ queue: 'cycles' }], ratio: 1, maxFiles: 2, fileLimit: 10_000 },
  });
  await meta.call('POST', '/v1/tables', {
    name: 'cancels',
    config: { queues: [{ queue: 'cancels' }], ratio: 1, maxFiles: 2, maxAttempts: 100 },
  });

  // Register files in the (not yet hosted) tablets' rows.
  const tabletsOf = async (table: string) =>
    (await meta.call<{ tablets: TabletView[] }>('GET', `/v1/tables/${table}`)).tablets;
  for (const t of await tabletsOf('cycles')) {
    await meta.mutate([
      {
        puts: Array.from({ length: fileCount }, (_, i) => ({
          row: t.tablet,
          col: fileCol(`tables/${t.tableId}/Ibench${i}.rf`),
          value: JSON.stringify({ size: 1_000, entries: 10 }),
        })),
      },
    ]);
  }
  const [cancelTablet] = await tabletsOf('cancels');
  await meta.mutate([
    {
      puts: [0, 1].map((i) => ({
        row: cancelTablet!.tablet,
        col: fileCol(`tables/${cancelTablet!.tableId}/Ibench${i}.rf`),
        value: JSON.stringify({ size: 1_000, entries: 10 }),
      })),
    },
  ]);

  const tserverProc = await cluster.start('tserver', ['tserver'], 'tablet server ready');
  const server = (await tserverProc.waitForLog((l) => l.msg === 'tablet server ready')).name as string;
  for (;;) {
    const all = [...(await tabletsOf('cycles')), ...(await tabletsOf('cancels'))];
    if (all.every((t) => t.loc)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const ts = cluster.client(`http://${server}`);

  // Compactors: a session and a node each.
  const compactors = await Promise.all(
    Array.from({ length: compactorCount }, async () => {
      const session = await ZkSession.connect({
        connectString: cluster.zk.connectString,
        sessionTimeoutMs: 4_000,
        auth: digestAuthFromSecret(cluster.secret),
      });
      const { path } = await createProtected(session, cluster.layout.queueNode(cycleQueue.id), 'c-', '{}');
      return { session, path };
    }),
  );

  // 1. Reserve+commit cycles.
  await throughput(compactorCount, 1_000, () => ts.get('/v1/ping'));
  const noop = await throughput(compactorCount, 3_000, () => ts.get('/v1/ping'));
  const tablets = (await tabletsOf('cycles')).map((t) => t.tablet);
  const cursor = Array.from({ length: compactorCount }, (_, l) => l);
  let cycles = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    compactors.map(async (c, l) => {
      while (cursor[l]! < tablets.length) {
        const tablet = tablets[cursor[l]!]!;
        const { job } = await ts.post<{ job: ReservedJob | null }>('/v1/reserve', {
          tablet,
          queueId: cycleQueue.id,
          compactor: c.path,
        });
        if (!job) {
          cursor[l] = cursor[l]! + compactorCount;
          continue;
        }
        await ts.post('/v1/commit', { tablet, ecid: job.ecid, compactor: c.path, output: null });
        cycles++;
      }
    }),
  );
  const cycleSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const remaining = (await tabletsOf('cycles')).reduce((n, t) => n + t.files.length, 0);
  if (remaining > tabletCount) throw new Error(`cycles left ${remaining} files behind`);

  // 2. Cancel latency.
  const latencies: number[] = [];
  for (let i = 0; i < trials; i++) {
    const session = await ZkSession.connect({
      connectString: cluster.zk.connectString,
      sessionTimeoutMs: 4_000,
      auth: digestAuthFromSecret(cluster.secret),
    });
    const { path } = await createProtected(session, cluster.layout.queueNode(cancelQueue.id), 'c-', '{}');
    const { job } = await ts.post<{ job: ReservedJob | null }>('/v1/reserve', {
      tablet: cancelTablet!.tablet,
      queueId: cancelQueue.id,
      compactor: path,
    });
    if (!job) throw new Error('no job to reserve for the cancel trial');
    const waiter = meta.call<{ work: unknown }>(
      'POST',
      '/v1/queues/next',
      { queueId: cancelQueue.id, bins: 1, startBin: 0, waitMs: 10_000 },
      { idempotent: true, timeoutMs: 15_000 },
    );
    await new Promise((r) => setTimeout(r, 20)); // the long poll is waiting
    const t0 = process.hrtime.bigint();
    await session.close(); // the node disappears now
    const { work } = await waiter;
    if (!work) throw new Error('the entry did not come back');
    latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }

  printRows(`bench/reserve — one tablet server, ${tabletCount} tablets, ${compactorCount} compactors`, [
    {
      figure: 'reserve+commit cycles / s',
      value: fmt(cycles / cycleSeconds),
      baseline: `${fmt(noop.perSecond)} no-op RPCs / s`,
      ratio: `${fmt(cycles / cycleSeconds / noop.perSecond, 2)}×`,
      target: '≥ 1,000 / s',
    },
    { figure: 'cycles measured', value: fmt(cycles) },
    {
      figure: `cancel latency (node gone → entry back), ${trials} trials: p50 / p99`,
      value: `${fmt(percentile(latencies, 50), 1)} / ${fmt(percentile(latencies, 99), 1)} ms`,
      target: 'p99 < 50 ms',
    },
  ]);
  await Promise.all(compactors.map((c) => c.session.close()));
} finally {
  await cluster.stop();
}
