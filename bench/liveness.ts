/**
 * bench/liveness: how fast work moves when compactors come and go — with real compactor processes.
 *
 *   npx tsx bench/liveness.ts [--trials 10] [--session-timeout 2000] [--idle-seconds 30] [--idle-compactors 4]
 *
 * 1. Reclaim after kill -9: a compactor is killed in the middle of a job; the time until another (idle)
 *    compactor has re-reserved the job. Bounded by the ZooKeeper session timeout: the dead compactor's
 *    node disappears when its session expires, the tablet server cancels its reservation at once and the
 *    waiting compactor is woken.
 * 2. Graceful release: SIGTERM to a compactor in the middle of a job; the time until another has it.
 * 3. Pickup: an idle compactor waiting for work; the time from the write that queues a job to its
 *    reservation. And the idle request rate: requests for work per idle compactor per 10 s.
 *
 * Times come from the processes' own log timestamps (one machine, one clock).
 */
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import type { ManagedProcess } from '../test/support/process-group.js';
import { fmt, percentile, printRows, startBenchCluster } from './lib.js';

const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '10' },
    'session-timeout': { type: 'string', default: '2000' },
    'idle-seconds': { type: 'string', default: '30' },
    'idle-compactors': { type: 'string', default: '4' },
  },
});
const trials = Number(values.trials);
const sessionTimeoutMs = Number(values['session-timeout']);
const idleSeconds = Number(values['idle-seconds']);
const idleCompactors = Number(values['idle-compactors']);

const cluster = await startBenchCluster({ sessionTimeoutMs });
try {
  await cluster.start('manager', ['manager'], 'manager active');
  await cluster.start('tserver', ['tserver'], 'tablet server ready');
  const meta = cluster.meta;
  await meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
  const splits = Array.from({ length: 3 * trials + 20 }, (_, i) => `t${String(i).padStart(4, '0')}`);
  await meta.call('POST', '/v1/tables', {
    name: 'live',
    splits,
    config: { queues: [{ queue: 'q' }], maxAttempts: 100 },
  });
  const client = new ExcClient({ meta, secret: cluster.secret, logger: silentLogger() });
  for (;;) {
    if ((await client.tablets('live')).every((t) => t.loc)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  let next = 0;
  /** Three batches into a fresh tablet: the third one queues a job of about 60 KB. */
  const queueJob = async (): Promise<{ tablet: string; queuedFrom: number; ingestMs: number }> => {
    const prefix = splits[next++]!;
    const batch = (i: number) =>
      Array.from({ length: 100 }, (_, j) => ({
        row: `${prefix}-${i}-${j}`,
        ts: 1_000 + i,
        value: 'x'.repeat(180),
      }));
    await client.ingest('live', batch(0));
    await client.ingest('live', batch(1));
    const queuedFrom = Date.now();
    await client.ingest('live', batch(2));
    const tablets = await client.tablets('live');
    const tablet = tablets.find(
      (t) => t.endRowHex !== null && Buffer.from(t.endRowHex, 'hex').toString() > `${prefix}-`,
    )!;
    return { tablet: tablet.tablet, queuedFrom, ingestMs: Date.now() - queuedFrom };
  };
  const startedOn = (p: ManagedProcess, tablet: string, timeoutMs = 30_000) =>
    p
      .waitForLog((l) => l.msg === 'compaction started' && l.tablet === tablet, timeoutMs)
      .then((l) => Date.parse(l.time as string));

  // Idle compactors take whatever is not held by a slow one; the slow one takes the job first.
  const heir = await cluster.start('heir', ['compactor', 'q'], 'compactor ready');
  const reclaim: number[] = [];
  const release: number[] = [];
  for (const [kind, results] of [
    ['kill', reclaim],
    ['term', release],
  ] as const) {
    for (let i = 0; i < trials; i++) {
      // The heir must not grab the job first: it is paused while the slow compactor reserves.
      heir.pause();
      const slow = await cluster.start(
        `slow-${kind}-${i}`,
        ['compactor', 'q', '--throughput', '5000'],
        'compactor ready',
      );
      const { tablet } = await queueJob();
      await startedOn(slow, tablet);
      heir.resume();
      await new Promise((r) => setTimeout(r, 200)); // the heir is waiting for work again
      const t0 = Date.now();
      if (kind === 'kill') slow.kill();
      else slow.signal('SIGTERM');
      const t1 = await startedOn(heir, tablet, sessionTimeoutMs + 30_000);
      results.push(t1 - t0);
      await slow.waitExit();
    }
  }

  // Pickup by an idle compactor.
  const pickup: number[] = [];
  const ingests: number[] = [];
  for (let i = 0; i < trials * 2; i++) {
    await new Promise((r) => setTimeout(r, 300)); // idle again, waiting on the manager
    const { tablet, queuedFrom, ingestMs } = await queueJob();
    pickup.push((await startedOn(heir, tablet)) - queuedFrom);
    ingests.push(ingestMs);
  }

  // Idle request rate.
  heir.kill();
  await heir.waitExit();
  const idle = await Promise.all(
    Array.from({ length: idleCompactors }, (_, i) =>
      cluster.start(`idle-${i}`, ['compactor', 'q'], 'compactor ready'),
    ),
  );
  const before = (await meta.call<{ work: { requests: number } }>('GET', '/v1/status')).work.requests;
  await new Promise((r) => setTimeout(r, idleSeconds * 1_000));
  const after = (await meta.call<{ work: { requests: number } }>('GET', '/v1/status')).work.requests;
  const perTenSeconds = ((after - before) / idleCompactors / idleSeconds) * 10;
  for (const p of idle) p.kill();

  const ms = (v: number[]) => `${fmt(percentile(v, 50))} / ${fmt(percentile(v, 99))} ms`;
  printRows(
    `bench/liveness — session timeout ${sessionTimeoutMs} ms, ${trials} trials each (pickup ${trials * 2})`,
    [
      {
        figure: 'reclaim after kill -9 (kill → re-reserved): p50 / p99',
        value: ms(reclaim),
        baseline: 'Accumulo 2.1: 15 min; SlateDB: 35 s; Pyroscope: 20 s',
        ratio: `${fmt(percentile(reclaim, 99) / sessionTimeoutMs, 2)}× the session timeout`,
        target: `p99 ≤ ${fmt(sessionTimeoutMs + 500)} ms`,
      },
      {
        figure: 'graceful release (SIGTERM → re-reserved): p50 / p99',
        value: ms(release),
        target: 'p99 < 250 ms',
      },
      {
        figure: 'pickup (write that queues a job → reserved): p50 / p99',
        value: ms(pickup),
        baseline: `the write itself: ${ms(ingests)}`,
        target: 'p99 < 100 ms',
      },
      {
        figure: `idle requests per compactor per 10 s (${idleCompactors} idle, ${idleSeconds} s)`,
        value: fmt(perTenSeconds, 2),
        target: '≤ 1',
      },
    ],
  );
} finally {
  await cluster.stop();
}
