/**
 * bench/liveness: how fast work moves when compactors come and go — with real compactor processes.
 *
 *   npx tsx bench/liveness.ts [--trials 10] [--session-timeout 6000] [--idle-seconds 30]
 *                             [--idle-compactors 4] [--leader-kills 20] [--json]
 *
 * 1. Reclaim after kill -9: a compactor is killed in the middle of a job; the time until another (idle)
 *    compactor has re-reserved the job. The dead compactor's link to the tablet server closes with it, and
 *    the tablet server fences it (deletes its node) after a short grace: far sooner than its session
 *    timeout. The tablet server cancels its reservation at once and the waiting compactor is woken.
 * 2. Reclaim after SIGSTOP: a paused process is not dead, its connections stay open; its work comes back
 *    only when its session expires (the figure must be about the session timeout, never less).
 * 3. Graceful release: SIGTERM to a compactor in the middle of a job; the time until another has it.
 * 4. Pickup: an idle compactor waiting for work; the time from the write that queues a job to its
 *    reservation. And the idle request rate: requests for work per idle compactor per 10 s.
 * 5. Leader kills: against a three-server ensemble with jobs held throughout, the ZooKeeper leader is
 *    killed and restarted `--leader-kills` times: reservations cancelled and sessions lost (target 0).
 * 6. Rejoin: a tablet server paused past its session timeout; from its resume to serving again with a new
 *    session, and to its tablets being hosted again.
 *
 * Times come from the processes' own log timestamps (one machine, one clock). `--json` prints one JSON
 * object instead of the tables.
 */
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import { JOB_RATIO, compactionStarted, queueJob as ingestJob } from './jobs.js';
import { fmt, percentile, printRows, startBenchCluster, type BenchCluster } from './lib.js';

const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '10' },
    'session-timeout': { type: 'string', default: '6000' },
    'idle-seconds': { type: 'string', default: '30' },
    'idle-compactors': { type: 'string', default: '4' },
    'leader-kills': { type: 'string', default: '20' },
    json: { type: 'boolean', default: false },
  },
});
const leaderKills = Number(values['leader-kills']);
const say = (text: string): void => void process.stderr.write(`${text}\n`);
const trials = Number(values.trials);
const sessionTimeoutMs = Number(values['session-timeout']);
const idleSeconds = Number(values['idle-seconds']);
const idleCompactors = Number(values['idle-compactors']);

const figures: Record<string, unknown> = { sessionTimeoutMs, trials };
const cluster = await startBenchCluster({ sessionTimeoutMs });
try {
  await cluster.start('manager', ['manager'], 'manager active');
  const firstTserver = await cluster.start('tserver', ['tserver'], 'tablet server ready');
  const meta = cluster.meta;
  await meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
  const splits = Array.from({ length: 3 * trials + 20 }, (_, i) => `t${String(i).padStart(4, '0')}`);
  await meta.call('POST', '/v1/tables', {
    name: 'live',
    splits,
    config: { queues: [{ queue: 'q' }], maxAttempts: 100, ratio: JOB_RATIO },
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
    const queuedFrom = await ingestJob(client, 'live', prefix);
    const tablets = await client.tablets('live');
    const tablet = tablets.find(
      (t) => t.endRowHex !== null && Buffer.from(t.endRowHex, 'hex').toString() > `${prefix}-`,
    )!;
    return { tablet: tablet.tablet, queuedFrom, ingestMs: Date.now() - queuedFrom };
  };
  const startedOn = compactionStarted;

  // Idle compactors take whatever is not held by a slow one; the slow one takes the job first.
  const heir = await cluster.start('heir', ['compactor', 'q'], 'compactor ready');
  const reclaim: number[] = [];
  const paused: number[] = [];
  const release: number[] = [];
  for (const [kind, results] of [
    ['kill', reclaim],
    ['stop', paused],
    ['term', release],
  ] as const) {
    // A pause waits out the session timeout: fewer trials of it.
    const runs = kind === 'stop' ? Math.min(trials, 3) : trials;
    say(`liveness: ${runs} × ${kind}`);
    for (let i = 0; i < runs; i++) {
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
      else if (kind === 'stop') slow.pause();
      else slow.signal('SIGTERM');
      const t1 = await startedOn(heir, tablet, sessionTimeoutMs + 30_000);
      results.push(t1 - t0);
      if (kind === 'stop') slow.kill();
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

  // A tablet server paused past its session: it rejoins by itself. Alone, so its tablets must come back
  // to it.
  say('liveness: tablet server rejoin');
  firstTserver.kill();
  await firstTserver.waitExit();
  const rejoin = await tserverRejoin(cluster);

  const dist = (v: number[]) => ({ p50: percentile(v, 50), p99: percentile(v, 99), n: v.length });
  Object.assign(figures, {
    reclaimAfterKillMs: dist(reclaim),
    reclaimAfterPauseMs: dist(paused),
    releaseMs: dist(release),
    pickupMs: dist(pickup),
    ingestMs: dist(ingests),
    idleRequestsPer10s: perTenSeconds,
    tserverRejoin: rejoin,
  });
} finally {
  await cluster.stop();
}

// Leader kills, against an ensemble of three with jobs held throughout.
say(`liveness: ${leaderKills} ZooKeeper leader kills`);
figures.leaderKills = await leaderKillTrials(leaderKills);

if (values.json) process.stdout.write(`${JSON.stringify(figures)}\n`);
else report();

function report(): void {
  type D = { p50: number; p99: number; n: number };
  const f = figures as {
    reclaimAfterKillMs: D;
    reclaimAfterPauseMs: D;
    releaseMs: D;
    pickupMs: D;
    ingestMs: D;
    idleRequestsPer10s: number;
    tserverRejoin: { servingMs: number; hostedMs: number };
    leaderKills: { kills: number; cancels: number; sessionsLost: number; restarts: number };
  };
  const ms = (d: D) => `${fmt(d.p50)} / ${fmt(d.p99)} ms`;
  printRows(
    `bench/liveness — session timeout ${sessionTimeoutMs} ms, ${trials} trials each (pickup ${trials * 2})`,
    [
      {
        figure: 'reclaim after kill -9 (kill → re-reserved): p50 / p99',
        value: ms(f.reclaimAfterKillMs),
        baseline: `session timeout ${fmt(sessionTimeoutMs)} ms; Accumulo 2.1: 15 min; SlateDB: 35 s`,
        ratio: `${fmt(sessionTimeoutMs / f.reclaimAfterKillMs.p99, 1)}× faster than the session timeout`,
        target: 'p99 ≤ 300 ms',
      },
      {
        figure: 'reclaim after SIGSTOP (pause → re-reserved): p50 / p99',
        value: ms(f.reclaimAfterPauseMs),
        baseline: `session timeout ${fmt(sessionTimeoutMs)} ms`,
        ratio: `${fmt(f.reclaimAfterPauseMs.p50 / sessionTimeoutMs, 2)}× the session timeout`,
        target: '≈ 1× (a paused process is not dead: it must wait)',
      },
      {
        figure: 'graceful release (SIGTERM → re-reserved): p50 / p99',
        value: ms(f.releaseMs),
        target: 'p99 < 250 ms',
      },
      {
        figure: 'pickup (write that queues a job → reserved): p50 / p99',
        value: ms(f.pickupMs),
        baseline: `the write itself: ${ms(f.ingestMs)}`,
        target: 'p99 < 100 ms',
      },
      {
        figure: `idle requests per compactor per 10 s (${idleCompactors} idle, ${idleSeconds} s)`,
        value: fmt(f.idleRequestsPer10s, 2),
        target: '≤ 1',
      },
      {
        figure: `ZooKeeper leader kills (${f.leaderKills.kills}, jobs held): reservations cancelled / sessions lost`,
        value: `${f.leaderKills.cancels} / ${f.leaderKills.sessionsLost}`,
        target: '0 / 0',
      },
      {
        figure: 'tablet server paused past its session: resume → serving again / tablets hosted again',
        value: `${fmt(f.tserverRejoin.servingMs)} / ${fmt(f.tserverRejoin.hostedMs)} ms`,
        baseline: `session timeout ${fmt(sessionTimeoutMs)} ms`,
        target: 'no restart',
      },
    ],
  );
}

/** A lone tablet server paused past its session, then resumed: how long until it serves its tablets again. */
async function tserverRejoin(c: BenchCluster): Promise<{ servingMs: number; hostedMs: number }> {
  const t = await c.start('rejoiner', ['tserver'], 'tablet server ready');
  await c.meta.call('POST', '/v1/tables', { name: 'rejoin', splits: ['m'] });
  const client = new ExcClient({ meta: c.meta, secret: c.secret, logger: silentLogger() });
  const hostedOn = async (server: string, session?: string): Promise<boolean> =>
    (await client.tablets('rejoin')).every(
      (x) => x.loc?.server === server && (session === undefined || x.loc.session !== session),
    );
  const name = (await t.waitForLog((l) => l.msg === 'tablet server ready')).name as string;
  while (!(await hostedOn(name))) await new Promise((r) => setTimeout(r, 100));
  const before = (await client.tablets('rejoin'))[0]!.loc!.session;
  t.pause();
  await new Promise((r) => setTimeout(r, sessionTimeoutMs + 1_500));
  const resumed = Date.now();
  t.resume();
  const ready = await t.waitForLog(
    (l) => l.msg === 'tablet server ready' && l.session !== before,
    sessionTimeoutMs + 30_000,
  );
  while (!(await hostedOn(name, before))) await new Promise((r) => setTimeout(r, 50));
  const hostedMs = Date.now() - resumed;
  t.kill();
  return { servingMs: Date.parse(ready.time as string) - resumed, hostedMs };
}

/** Leader kills with compactions held across them: nothing may be cancelled, no session lost. */
async function leaderKillTrials(
  kills: number,
): Promise<{ kills: number; cancels: number; sessionsLost: number; restarts: number }> {
  const c = await startBenchCluster({ sessionTimeoutMs, ensemble: true });
  try {
    const e = c.ensemble!;
    const procs = [
      await c.start('manager', ['manager'], 'manager active'),
      await c.start('tserver', ['tserver'], 'tablet server ready'),
    ];
    await c.meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
    const splits = ['b', 'c', 'd'];
    await c.meta.call('POST', '/v1/tables', {
      name: 'held',
      splits,
      config: { queues: [{ queue: 'q' }], maxAttempts: 100, ratio: JOB_RATIO },
    });
    const client = new ExcClient({ meta: c.meta, secret: c.secret, logger: silentLogger() });
    while (!(await client.tablets('held')).every((t) => t.loc)) await new Promise((r) => setTimeout(r, 100));
    // Slow compactors: each keeps a job (a reservation) for the whole run, through every election.
    for (let i = 0; i < 2; i++)
      procs.push(await c.start(`slow-${i}`, ['compactor', 'q', '--throughput', '500'], 'compactor ready'));
    for (const prefix of ['a', 'b']) {
      for (let i = 0; i < 3; i++) {
        await client.ingest(
          'held',
          Array.from({ length: 300 }, (_, j) => ({
            row: `${prefix}${j}`,
            ts: i + 1,
            value: 'x'.repeat(100),
          })),
        );
      }
    }
    for (const p of procs.slice(2)) await p.waitForLog((l) => l.msg === 'compaction started', 30_000);
    for (let i = 0; i < kills; i++) {
      const { leader } = await e.waitForQuorum(30_000);
      await e.kill(leader);
      await e.waitForQuorum(30_000);
      await e.restart(leader);
    }
    await new Promise((r) => setTimeout(r, 2_000));
    const lines = procs.flatMap((p) => p.lines);
    return {
      kills,
      cancels: lines.filter((l) => l.msg === 'reservation cancelled').length,
      sessionsLost: lines.filter((l) => l.msg === 'zookeeper session lost').length,
      restarts: procs.filter((p) => !p.running).length,
    };
  } finally {
    await c.stop();
  }
}
