/**
 * The chaos run's checks of the protocol's invariants, read through the project's own interfaces: the
 * outcome rows the tablet servers write (`~done:<ecid>`), the running compactions the admin API lists,
 * `excompact admin check --json`, and the processes' logs.
 *
 * - Outcomes: every reservation ends exactly once (an outcome row, never two end records in the logs, never
 *   a compactor believing it committed what the store cancelled), and none is left without an end.
 * - Zombies: no commit is accepted from a compactor after it resumed from a pause its session expired in,
 *   or after its node was deleted from outside (or went after outliving a pause: a leader election
 *   restarts every session's timer, so a pause past the timeout does not always expire the session).
 * - Dead reservations: while the run goes on, no reservation names a compactor whose node is gone for
 *   longer than the cluster needs to notice (its host may itself be down: then the new host cancels it).
 * - Reclaim latency: after each kill -9 of a compactor holding work, how long until all of it was back.
 * - Consistency: at quiescent points, a problem `admin check` reports in every check for a while (known
 *   by everything but its age, so an orphan file that grows older is still the same problem).
 */
import { encodeTime } from 'ulid';
import { DONE_PREFIX, parseOutcome, type Outcome } from '../src/meta/outcomes.js';
import type { CheckReport } from '../src/meta/check-view.js';
import type { Cursor } from '../src/meta/types.js';
import type { ChaosCluster } from './cluster.js';
import type { LogFindings } from './logs.js';
export { readLogs, type ElasticFigures, type JobFigures, type LogFindings } from './logs.js';
import type { FaultInjector } from './faults.js';
import type { FaultSpan } from './schedule.js';
import type { NodeDeath } from './node-deaths.js';
import { patiently, type ChaosLog } from './report.js';

export type OutcomeRecord = Pick<Outcome, 'outcome' | 'reason' | 'compactor' | 'at' | 'reservedAt'>;

/**
 * Reads outcome rows as they are written. Rows are keyed by the reservation's ULID, which sorts by when it
 * was *reserved*, not when it ended: a poll reads again from a few minutes back (a job that ran longer is
 * found by the final, full read).
 */
export class OutcomeReader {
  readonly outcomes = new Map<string, OutcomeRecord>();
  committed = 0;

  constructor(private readonly cluster: ChaosCluster) {}

  async poll(options: { full?: boolean } = {}): Promise<void> {
    let after: Cursor | undefined = options.full
      ? undefined
      : { row: `${DONE_PREFIX}${encodeTime(Date.now() - 5 * 60_000, 10)}`, col: '' };
    for (;;) {
      const page = await this.cluster.meta.scan({
        prefix: DONE_PREFIX,
        limit: 5_000,
        ...(after ? { after } : {}),
      });
      for (const c of page.cells) {
        const o = parseOutcome(c.value);
        const ecid = c.row.slice(DONE_PREFIX.length);
        if (!o || this.outcomes.has(ecid)) continue;
        this.outcomes.set(ecid, {
          outcome: o.outcome,
          ...(o.reason ? { reason: o.reason } : {}),
          compactor: o.compactor,
          at: o.at,
          reservedAt: o.reservedAt,
        });
        if (o.outcome === 'committed') this.committed++;
      }
      if (!page.next) return;
      after = page.next;
    }
  }
}

/** Watches the running reservations for ones naming a dead compactor. */
export class DeadReservationWatch {
  private readonly firstSeen = new Map<string, number>();
  readonly violations = new Set<string>();
  longestMs = 0;

  constructor(
    private readonly cluster: ChaosCluster,
    private readonly limitMs: number,
    private readonly log: ChaosLog,
  ) {}

  async poll(): Promise<void> {
    const { running } = await this.cluster.meta.call<{ running: { ecid: string; compactor: string }[] }>(
      'GET',
      '/v1/compactions?state=running',
    );
    const alive = new Map<string, boolean>();
    const now = Date.now();
    const current = new Set<string>();
    for (const r of running) {
      if (!alive.has(r.compactor))
        alive.set(r.compactor, (await this.cluster.session.exists(r.compactor)) !== null);
      if (alive.get(r.compactor)) continue;
      current.add(r.ecid);
      const since = this.firstSeen.get(r.ecid) ?? now;
      this.firstSeen.set(r.ecid, since);
      this.longestMs = Math.max(this.longestMs, now - since);
      if (now - since > this.limitMs && !this.violations.has(r.ecid)) {
        this.violations.add(r.ecid);
        this.log.event(
          'dead-reservation',
          { ecid: r.ecid, compactor: r.compactor, forMs: now - since },
          `VIOLATION: reservation ${r.ecid} names dead compactor ${r.compactor} for ${now - since} ms`,
        );
      }
    }
    for (const ecid of [...this.firstSeen.keys()]) if (!current.has(ecid)) this.firstSeen.delete(ecid);
  }
}

export interface OutcomeFindings {
  double: string[];
  never: string[];
  zombieCommits: string[];
  reclaimMs: number[];
  /** The kill whose work took longest to be back, to look up in the logs, and what else was going on. */
  slowestReclaim: { compactor: string; ecid: string; ms: number; during: string[] } | undefined;
}

/**
 * The faults whose effect overlapped [at, at + ms] (the kill itself among them), each as `kind → target,
 * from ±s for s` relative to `at`.
 */
export function faultsDuring(
  timeline: readonly FaultSpan[],
  at: number,
  ms: number,
  sessionTimeoutMs = 0,
): string[] {
  const s = (x: number) => `${(x / 1000).toFixed(1)} s`;
  // A killed process's ZooKeeper session outlives it by up to a session timeout (its node, its
  // tablets' location, its leadership), however soon it is restarted: its effects last that long.
  const lasts = (f: FaultSpan) =>
    SESSION_KILLS.has(f.fault) ? Math.max(f.forMs, sessionTimeoutMs) : f.forMs;
  const lingers = (f: FaultSpan) => (lasts(f) > f.forMs ? ` (its session up to ${s(lasts(f))})` : '');
  // Signed after rounding to the tenth printed: a fault a millisecond before the kill is "+0.0 s".
  const offset = (x: number) => {
    const tenths = Math.round(x / 100);
    return `${tenths < 0 ? '-' : '+'}${s(Math.abs(tenths) * 100)}`;
  };
  return timeline
    .filter((f) => f.at <= at + ms && f.at + lasts(f) >= at)
    .sort((a, b) => a.at - b.at)
    .map((f) => `${f.fault} → ${f.target}, from ${offset(f.at - at)} for ${s(f.forMs)}${lingers(f)}`);
}

/** Faults that kill a process holding a ZooKeeper session (a ZooKeeper server's kill ends none). */
const SESSION_KILLS = new Set(['compactor-kill', 'tserver-kill', 'manager-kill']);

/** Judges the outcomes against the logs and the faults, once every reservation had time to end. */
export function judgeOutcomes(
  outcomes: ReadonlyMap<string, OutcomeRecord>,
  logs: LogFindings,
  stillRunning: readonly string[],
  faults: Pick<FaultInjector, 'zombies' | 'deletedNodes' | 'compactorKills'> & {
    timeline?: readonly FaultSpan[];
  },
  nodes: { deaths: readonly NodeDeath[]; sessionTimeoutMs: number },
): OutcomeFindings {
  const double = new Set<string>();
  for (const [ecid, n] of logs.ends) if (n > 1) double.add(ecid);
  for (const ecid of logs.compactorCommitted) {
    if (outcomes.get(ecid)?.outcome === 'cancelled') double.add(ecid);
  }
  const never = [...logs.reserved].filter((ecid) => !outcomes.has(ecid)).concat(stillRunning);

  const byCompactor = new Map<string, { ecid: string; o: OutcomeRecord }[]>();
  for (const [ecid, o] of outcomes) {
    const list = byCompactor.get(o.compactor) ?? [];
    list.push({ ecid, o });
    byCompactor.set(o.compactor, list);
  }
  const zombieCommits = new Set<string>();
  for (const z of faults.zombies) {
    // A session that outlived the pause is judged by when its node went (below), not by the pause.
    if (z.sessionExpired !== true) continue;
    for (const { ecid, o } of byCompactor.get(z.compactor) ?? [])
      if (o.outcome === 'committed' && o.at >= z.resumedAt) zombieCommits.add(ecid);
  }
  // Any compactor node that went (deleted from outside, its session expired or closed, fenced by a tablet
  // server): the tablet server checks the node right before it commits, trusting its watch while its own
  // session is connected, so it may commit a moment after the node went — until it hears of it, or its
  // watchdog finds its own connection dead. Both within a session timeout; later is a zombie's commit.
  for (const d of [...faults.deletedNodes, ...nodes.deaths]) {
    for (const { ecid, o } of byCompactor.get(d.compactor) ?? [])
      if (o.outcome === 'committed' && o.at > d.at + nodes.sessionTimeoutMs) zombieCommits.add(ecid);
  }
  const reclaimMs: number[] = [];
  let slowestReclaim: OutcomeFindings['slowestReclaim'];
  for (const k of faults.compactorKills) {
    const back = (byCompactor.get(k.compactor) ?? [])
      .filter(({ o }) => o.outcome === 'cancelled' && o.reason === 'compactor-gone' && o.at >= k.at)
      .map(({ ecid, o }) => ({ ecid, ms: o.at - k.at }));
    if (back.length === 0) continue;
    const last = back.reduce((a, b) => (b.ms > a.ms ? b : a));
    reclaimMs.push(last.ms);
    if (!slowestReclaim || last.ms > slowestReclaim.ms)
      slowestReclaim = {
        ...last,
        compactor: k.compactor,
        during: faultsDuring(faults.timeline ?? [], k.at, last.ms, nodes.sessionTimeoutMs),
      };
  }
  return {
    double: [...double],
    never: [...new Set(never)],
    zombieCommits: [...zombieCommits],
    reclaimMs,
    slowestReclaim,
  };
}

/**
 * Fields of a check's problem items that change from one check to the next while the problem stays the
 * same: how old an orphan or a temporary is. They are no part of what the problem is.
 */
const VOLATILE_FIELDS: ReadonlySet<string> = new Set(['ageMs']);

/**
 * What identifies a problem across checks: its name and every field of its item but the volatile ones.
 * Keyed by the whole item, an orphan file was a new problem in every check (its `ageMs` had grown), so it
 * never stood and only the final check could catch it.
 */
export function problemKey(name: string, item: Record<string, unknown>): string {
  const fields = Object.entries(item)
    .filter(([field]) => !VOLATILE_FIELDS.has(field))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${name} ${JSON.stringify(fields)}`;
}

/**
 * Judges successive check reports: a problem (other than an informational one) seen in every report for
 * `graceMs` stands — a violation; one that comes and goes is a busy cluster caught between two reads.
 * The check's own grace periods already excuse what is fresh (an unreferenced file is an orphan only
 * past the GC grace and the wait for the next sweep), so what stands is what the cluster failed to mend.
 */
export class StandingProblems {
  private readonly firstSeen = new Map<string, number>();

  constructor(private readonly graceMs: number) {}

  /** Takes the report of a check made at `now`: how many problems it has, and those that stand. */
  observe(report: CheckReport, now: number): { seen: number; standing: Record<string, unknown[]> } {
    const seen = new Set<string>();
    const standing: Record<string, unknown[]> = {};
    for (const [name, p] of Object.entries(report.problems)) {
      if (p.severity === 'info' || !p.count) continue;
      for (const item of p.items) {
        const key = problemKey(name, item);
        seen.add(key);
        const since = this.firstSeen.get(key) ?? now;
        this.firstSeen.set(key, since);
        if (now - since >= this.graceMs) (standing[name] ??= []).push(item);
      }
    }
    // A problem that went away and comes back is new again.
    for (const key of [...this.firstSeen.keys()]) if (!seen.has(key)) this.firstSeen.delete(key);
    return { seen: seen.size, standing };
  }
}

/**
 * Runs `excompact admin check --json` until no problem stands (see {@link StandingProblems}), or none is
 * left, or `deadlineMs` passed.
 */
export async function standingProblems(
  cluster: ChaosCluster,
  graceMs: number,
  log: ChaosLog,
  deadlineMs = 90_000,
): Promise<{ report: CheckReport; standing: Record<string, unknown[]> }> {
  const judge = new StandingProblems(graceMs);
  const started = Date.now();
  for (;;) {
    // Exit code 5: the check found problems (they are judged here).
    const report = JSON.parse(
      await patiently('run admin check', log, () =>
        cluster.cli(['admin', 'check', '--json'], { okCodes: [0, 5] }),
      ),
    ) as CheckReport;
    const now = Date.now();
    const { seen, standing } = judge.observe(report, now);
    if (seen === 0 || Object.keys(standing).length > 0 || now - started > deadlineMs) {
      if (Object.keys(standing).length > 0)
        log.event(
          'check-problems',
          { standing },
          `VIOLATION: admin check: ${JSON.stringify(standing).slice(0, 500)}`,
        );
      return { report, standing };
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
