/**
 * One chaos run, start to verdict (see main.ts for what it does and why).
 */
import { join } from 'node:path';
import { describeError } from '../src/errors.js';
import type { HistoryAnswer } from '../src/meta/outcomes.js';
import { sleep } from '../src/retry.js';
import { NodeDeaths } from './node-deaths.js';
import {
  DeadReservationWatch,
  OutcomeReader,
  judgeOutcomes,
  readLogs,
  standingProblems,
  type OutcomeFindings,
} from './checks.js';
import type { ChaosCluster } from './cluster.js';
import type { FaultInjector } from './faults.js';
import type { ScheduledFault } from './schedule.js';
import { patiently, percentile, type ChaosLog } from './report.js';
import type { Rng } from './rng.js';
import { TABLES } from './tables.js';
import { Workload } from './workload.js';

export interface ChaosOptions {
  seconds: number;
  seed: string;
  rate: number;
  sessionTimeoutMs: number;
  checkEverySeconds: number;
  zkFaults: boolean;
  /** Fewer committed compactions than this is a failed run (the faults must not stop the work). */
  minCompactions: number;
  /** Fewer tablet splits, merges or moves than these is a failed run: the run did not test them. */
  minSplits?: number;
  minMerges?: number;
  minMoves?: number;
  /** End the faulted phase once this many compactions committed (a soak). */
  untilCompactions?: number;
  /** A table scanned behind a fence this often. */
  scanEverySeconds: number;
}

/** How long the cluster may go without acknowledging a write or committing a compaction. */
const STALL_MS = 60_000;

export interface ChaosResult {
  violations: number;
  summary: string;
  report: Record<string, unknown>;
}

export async function runChaos(
  cluster: ChaosCluster,
  injector: FaultInjector,
  schedule: ScheduledFault[],
  rng: Rng,
  options: ChaosOptions,
  log: ChaosLog,
): Promise<ChaosResult> {
  const started = Date.now();
  await cluster.start();
  const workload = new Workload(
    cluster,
    TABLES,
    rng,
    options.seed,
    log,
    join(cluster.options.dir, 'writes.jsonl'),
  );
  await workload.createTables();
  injector.fence = (table) => workload.tables.find((t) => t.spec.name === table)!.fence();
  injector.bulkImport = (table, pick) => workload.bulkImport(table, pick, cluster.options.dir);
  for (const t of TABLES) {
    while (!(await cluster.client.tablets(t.name)).every((x) => x.loc)) await sleep(200);
  }
  log.say(
    `cluster up in ${((Date.now() - started) / 1000).toFixed(1)}s: ${cluster.slots.map((s) => s.name).join(' ')}`,
  );

  const outcomes = new OutcomeReader(cluster);
  const dead = new DeadReservationWatch(cluster, 3 * options.sessionTimeoutMs + 10_000, log);
  const notes: string[] = [];
  let stopBackground = false;
  const background = (every: number, what: string, fn: () => Promise<void>): Promise<void> =>
    (async () => {
      while (!stopBackground) {
        await fn().catch((err: unknown) => log.event('background-error', { what, err: describeError(err) }));
        await sleep(every);
      }
    })();
  const deaths = new NodeDeaths(() => cluster.session, cluster.layout);
  const loops = [
    background(2_000, 'outcomes', () => outcomes.poll()),
    background(2_000, 'dead reservations', () => dead.poll()),
    background(250, 'compactor nodes', () => deaths.poll()),
  ];

  // The faulted phase: the schedule's clock stops during quiescent checks.
  workload.start(writersFor(options.rate), options.rate);
  let faultClock = 0;
  let nextFault = 0;
  let nextCheck = options.checkEverySeconds * 1000;
  let nextScan = 5_000;
  let nextUser = 20_000;
  let nextProgress = 15_000;
  const userCompactions: Promise<void>[] = [];
  const checks: { at: number; ok: boolean }[] = [];
  let last = Date.now();
  let lastMoved = '';
  let lastMovedAt = last;
  let stalled = false;
  let stalls = 0;
  while (faultClock < options.seconds * 1000) {
    if (options.untilCompactions !== undefined && outcomes.committed >= options.untilCompactions) break;
    await sleep(100);
    const now = Date.now();
    faultClock += now - last;
    last = now;
    while (nextFault < schedule.length && schedule[nextFault]!.at <= faultClock)
      injector.inject(schedule[nextFault++]!);
    if (faultClock >= nextScan) {
      nextScan += options.scanEverySeconds * 1000;
      const t = rng.pick(workload.tables);
      void workload.scanAndCompare(t).then((c) => {
        if (c && (c.lost || c.resurrected || c.wrong))
          log.event(
            'scan-mismatch',
            { table: t.spec.name, ...c },
            `VIOLATION: scan of ${t.spec.name}: ${c.lost} lost, ${c.resurrected} resurrected, ${c.wrong} wrong: ${c.examples.slice(0, 3).join('; ')}`,
          );
      });
    }
    if (faultClock >= nextUser) {
      nextUser += 25_000;
      userCompactions.push(workload.userCompaction(rng.pick(workload.tables), rng));
    }
    // Liveness: faults may slow the cluster, never stop it. A minute with no write acknowledged and no
    // compaction committed is a stall.
    const moved = `${outcomes.committed}/${workload.figures.writes}`;
    if (moved !== lastMoved) {
      lastMoved = moved;
      lastMovedAt = now;
      stalled = false;
    } else if (!stalled && now - lastMovedAt > STALL_MS) {
      stalled = true;
      stalls++;
      log.event(
        'stall',
        { forMs: now - lastMovedAt },
        `VIOLATION: no write and no compaction for ${Math.round((now - lastMovedAt) / 1000)} s`,
      );
    }
    if (faultClock >= nextProgress) {
      nextProgress += 15_000;
      log.say(
        `${outcomes.committed} compactions committed, ${workload.figures.writes} writes, ${workload.figures.scans} scans, ${sum(injector.counts)} faults`,
      );
    }
    if (faultClock >= nextCheck && faultClock < options.seconds * 1000 - 30_000) {
      nextCheck += options.checkEverySeconds * 1000;
      checks.push(await quiescentCheck('quiescent check'));
      workload.start(writersFor(options.rate), options.rate);
      last = Date.now();
      lastMovedAt = last;
    }
  }

  log.say('faults over: draining');
  await injector.drain();
  await workload.stop();
  await Promise.all(userCompactions);
  checks.push(await quiescentCheck('final check'));

  // Stop the compactors (each releases its jobs and exits 0); every reservation must then end.
  await cluster.stopRole('compactor');
  const settleBy = Date.now() + 2 * options.sessionTimeoutMs + 10_000;
  let stillRunning: string[] = [];
  for (;;) {
    const { running } = await patiently('list running compactions', log, () =>
      cluster.meta.call<{ running: { ecid: string }[] }>('GET', '/v1/compactions?state=running'),
    );
    stillRunning = running.map((r) => r.ecid);
    if (stillRunning.length === 0 || Date.now() > settleBy) break;
    await sleep(500);
  }
  // Garbage: after two grace periods and collections nothing unreferenced may remain.
  for (let i = 0; i < 2; i++) {
    await sleep(cluster.options.gcGraceMs + 1_000);
    await patiently('run the collector', log, () => cluster.meta.call('POST', '/v1/gc/run'));
  }
  const final = await standingProblems(cluster, 0, log, 0);
  const orphans =
    (final.report.problems.orphanFiles?.count ?? 0) +
    (final.report.problems.unreferencedPendingGc?.count ?? 0) +
    (final.report.problems.unreferencedYoung?.count ?? 0);
  const temporaries =
    (final.report.problems.staleTemporaries?.count ?? 0) +
    (final.report.problems.youngTemporaries?.count ?? 0);
  const missing = final.report.problems.missingFiles?.count ?? 0;
  stopBackground = true;
  await workload.closeJournal();
  await Promise.all(loops);
  await outcomes.poll({ full: true });
  // What an operator sees must agree: the history's counts, through the CLI, against the outcome rows.
  const since = `${Math.ceil((Date.now() - started) / 1000) + 60}s`;
  const history = JSON.parse(
    await patiently('read the history', log, () =>
      cluster.cli(['admin', 'compactions', 'history', '--since', since, '--limit', '1', '--json']),
    ),
  ) as HistoryAnswer;
  const cancelledSeen = outcomes.outcomes.size - outcomes.committed;
  const historyAgrees =
    history.counts.committed === outcomes.committed &&
    Object.values(history.counts.cancelled).reduce((a, b) => a + b, 0) === cancelledSeen;
  if (!historyAgrees)
    log.say(
      `VIOLATION: admin compactions history counts ${JSON.stringify(history.counts)}, the outcome rows ${outcomes.committed} committed and ${cancelledSeen} cancelled`,
    );
  await cluster.stop();

  const logs = await readLogs(cluster.procs.logDir);
  const judged: OutcomeFindings = judgeOutcomes(outcomes.outcomes, logs, stillRunning, injector, {
    deaths: deaths.deaths,
    sessionTimeoutMs: options.sessionTimeoutMs,
  });
  const lost = workload.problems.lost.size + missing;
  const resurrected = workload.problems.resurrected.size;
  const wrong = workload.problems.wrong.size;
  const figures = {
    seconds: Math.round(faultClock / 1000),
    wallSeconds: Math.round((Date.now() - started) / 1000),
    seed: options.seed,
    compactions: outcomes.committed,
    cancelled: outcomes.outcomes.size - outcomes.committed,
    faults: sum(injector.counts),
    faultsByKind: injector.counts,
    faultsSkipped: injector.skipped,
    s3FaultsInjected: cluster.proxy.injected,
    workload: workload.figures,
    lost,
    resurrected,
    wrong,
    double: judged.double.length,
    leaked: judged.never.length + temporaries,
    orphans,
    unexpectedExits: cluster.unexpected.length,
    zombieCommits: judged.zombieCommits.length,
    deadReservations: dead.violations.size,
    longestDeadReservationMs: dead.longestMs,
    checksFailed: checks.filter((c) => !c.ok).length,
    stuckWrites: workload.figures.stuckWrites,
    sickParked: injector.sickParked.length,
    stalls,
    historyAgrees,
    cancelledByReason: history.counts.cancelled,
    jobs: { ...logs.jobs, compactorFaultsIn: injector.jobsHit },
    elastic: logs.elastic,
    referenceIndex: logs.referenceIndex,
    activityIndex: logs.activityIndex,
    reclaimAfterKillMs: {
      samples: judged.reclaimMs.length,
      p50: percentile(judged.reclaimMs, 50),
      p99: percentile(judged.reclaimMs, 99),
      sessionTimeoutMs: options.sessionTimeoutMs,
      slowest: judged.slowestReclaim ?? null,
    },
    examples: {
      lost: [...workload.problems.lost].slice(0, 10),
      resurrected: [...workload.problems.resurrected].slice(0, 10),
      wrong: [...workload.problems.wrong].slice(0, 10),
      double: judged.double.slice(0, 10),
      never: judged.never.slice(0, 10),
      zombieCommits: judged.zombieCommits.slice(0, 10),
      unexpectedExits: cluster.unexpected.slice(0, 10),
    },
    notes,
  };
  const violations =
    lost +
    resurrected +
    wrong +
    figures.double +
    figures.leaked +
    orphans +
    figures.unexpectedExits +
    figures.zombieCommits +
    figures.deadReservations +
    figures.checksFailed +
    figures.stuckWrites +
    figures.sickParked +
    stalls +
    logs.referenceIndex.mismatches +
    logs.activityIndex.mismatches +
    (historyAgrees ? 0 : 1) +
    (figures.compactions < options.minCompactions ? 1 : 0) +
    shortOf('tablet splits', logs.elastic.splits, options.minSplits) +
    shortOf('tablet merges', logs.elastic.merges, options.minMerges) +
    shortOf('tablet moves', logs.elastic.moves, options.minMoves);
  if (figures.compactions < options.minCompactions)
    log.say(
      `VIOLATION: ${figures.compactions} compactions committed, fewer than the ${options.minCompactions} required`,
    );
  const r = figures.reclaimAfterKillMs;
  log.say(
    `reclaim after kill -9: p50 ${r.p50} ms, p99 ${r.p99} ms over ${r.samples} kills (session ${r.sessionTimeoutMs} ms)` +
      (r.slowest ? `; slowest ${r.slowest.ms} ms, ${r.slowest.ecid} of ${r.slowest.compactor}` : '') +
      (r.slowest?.during.length ? `, during: ${r.slowest.during.join('; ')}` : ''),
  );
  const el = logs.elastic;
  log.say(
    `elastic tablets: ${el.splits} splits (${el.thresholdSplits} by the split threshold), ${el.merges} merges ` +
      `(${el.mergeCancelled} compactions cancelled at the end of their wait), ${el.moves} moves, ` +
      `${el.offlineCancelled} compactions cancelled by a table taken offline; ` +
      `holds: ${el.holdsInstalled} outputs installed, ${el.holdsReleased} let go`,
  );
  for (const [what, ix] of [
    ["collector's reference index", logs.referenceIndex],
    ["manager's activity index", logs.activityIndex],
  ] as const) {
    log.say(`${what}: checked against the store ${ix.checks} times, ${ix.mismatches} differences`);
    if (ix.mismatches > 0) log.say(`VIOLATION: the ${what} differed from the store ${ix.mismatches} times`);
  }
  const j = logs.jobs;
  const h = injector.jobsHit;
  log.say(
    `large jobs: ${j.checkpointsRecorded} checkpoints recorded, ${j.checkpointsKept} kept by a cancel, ${j.resumed} resumed; ` +
      `${j.splitJobs} split jobs (${j.userSplitJobs} of user compactions), ${j.subJobsReserved} sub-jobs reserved, ${j.subJobsCancelled} cancelled and run again; ` +
      `compactor faults in ${h.checkpointed} checkpointed jobs, ${h['sub-job']} sub-jobs, ${h.plain} other jobs, ${h.idle} idle compactors`,
  );
  log.say(
    `faults: ${Object.entries(injector.counts)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  log.say(
    `checks: ${figures.zombieCommits} zombie commits, ${figures.deadReservations} dead reservations (longest ${dead.longestMs} ms), ${figures.checksFailed} failed quiescent checks, ${figures.stuckWrites} stuck writes, ${workload.figures.scans} scans, ${workload.figures.userCompactions} user compactions`,
  );
  const counted = workload.figures.counters;
  if (counted)
    log.say(
      `counters: ${counted.checked} checked by the last scan, after ${counted.increments} increments and ${counted.resets} resets`,
    );
  const summary =
    `chaos: ${figures.seconds}s seed ${options.seed}: ${figures.compactions} compactions, ${figures.faults} faults, ` +
    `${el.splits} splits, ${el.merges} merges, ${el.moves} moves, ` +
    `${lost} lost, ${resurrected} resurrected, ${wrong} wrong, ${figures.double} double, ${figures.leaked} leaked, ` +
    `${orphans} orphans, ${figures.unexpectedExits} unexpected exits, ${figures.zombieCommits} zombie commits, ` +
    `${figures.deadReservations} dead reservations, ${figures.checksFailed} failed checks, ${figures.stuckWrites} stuck writes, ${figures.sickParked} parked by a sick compactor, ${stalls} stalls`;
  return { violations, summary, report: figures };

  /** Faults drained, every process up, writes paused: scan every table and run the consistency check. */
  async function quiescentCheck(what: string): Promise<{ at: number; ok: boolean }> {
    log.say(`${what}: waiting for faults to run out`);
    await workload.stop();
    await injector.drain();
    const settleBy = Date.now() + 120_000;
    while (!cluster.settled(2_000) && Date.now() < settleBy) await sleep(250);
    let ok = cluster.settled();
    if (!ok) notes.push(`${what}: the cluster did not settle within 120 s`);
    // Parked jobs are released, as an operator would (they failed under the object store's faults).
    for (const t of TABLES)
      await cluster.cli(['admin', 'compactions', 'release', '--table', t.name]).catch(() => undefined);
    for (const t of workload.tables) {
      const c = await workload.scanAndCompare(t);
      if (!c) ok = false;
      else if (c.lost || c.resurrected || c.wrong) {
        ok = false;
        log.event(
          'scan-mismatch',
          { table: t.spec.name, ...c },
          `VIOLATION: scan of ${t.spec.name}: ${c.lost} lost, ${c.resurrected} resurrected, ${c.wrong} wrong: ${c.examples.slice(0, 3).join('; ')}`,
        );
      }
    }
    const { standing } = await standingProblems(cluster, 10_000, log);
    if (Object.keys(standing).length > 0) ok = false;
    log.event(
      'check',
      { what, ok },
      `${what}: ${ok ? 'ok' : 'PROBLEMS'} (${outcomes.committed} compactions so far)`,
    );
    return { at: Date.now(), ok };
  }
}

/**
 * Enough writers for the rate: a write takes a few hundred milliseconds, and under faults many wait for a
 * tablet to be hosted again (the others go on writing elsewhere).
 */
function writersFor(rate: number): number {
  return Math.max(8, Math.ceil(rate));
}

function sum(counts: Record<string, number>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** 1 (a violation, said) when `n` is below the `min` a run was asked for, else 0. */
function shortOf(what: string, n: number, min: number | undefined): number {
  if (min === undefined || n >= min) return 0;
  process.stdout.write(`VIOLATION: ${n} ${what}, fewer than the ${min} required\n`);
  return 1;
}
