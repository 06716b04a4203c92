/**
 * bench/failover: what a manager failover costs the cluster's clients — with real processes.
 *
 *   npx tsx bench/failover.ts [--failovers 20] [--session-timeout 2000] [--pause <ms>] [--json]
 *
 * A cluster of two managers (one active, one standby), two tablet servers and two compactors (throttled,
 * so a compaction is always under way) runs continuous ingest (the client library, from this process)
 * and a continuous loop of admin calls (MetaClient, what the CLI uses), plus one `excompact admin` CLI
 * process started at each fault. The active manager is then faulted `--failovers` times with kill -9 and
 * as many times with SIGSTOP, resumed `--pause` ms later (default 4 × the session timeout: well after its
 * successor took over, as after a long GC pause or an operator's SIGCONT; it then finds itself fenced and
 * stops serving), a new standby being started after each. Per failover:
 *
 * - failover time: the fault → the successor logs "manager active" (beside the session timeout of the
 *   same run, which bounds how soon ZooKeeper can let the successor in);
 * - first commit after failover: the successor is active → the first compaction committed by a tablet
 *   server after that (target p99 ≤ 1 s: the compactors' commits waiting on the old manager go through);
 * - and over the whole run, ingests, admin calls and CLI processes that failed (target 0), and the rows
 *   read back against the rows written.
 *
 * Times come from the processes' own log timestamps and this process's clock (one machine, one clock).
 * `--json` prints one JSON object instead of the table.
 */
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { describeError } from '../src/errors.js';
import { silentLogger } from '../src/log.js';
import { runCli, type LogLine, type ManagedProcess } from '../test/support/process-group.js';
import { fmt, percentile, printRows, startBenchCluster, type BenchCluster } from './lib.js';

const { values } = parseArgs({
  options: {
    failovers: { type: 'string', default: '20' },
    'session-timeout': { type: 'string', default: '2000' },
    pause: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const failovers = Number(values.failovers);
const sessionTimeoutMs = Number(values['session-timeout']);
const pauseMs = Number(values.pause ?? 4 * sessionTimeoutMs);
const command = `npx tsx bench/failover.ts --failovers ${failovers} --session-timeout ${sessionTimeoutMs} --pause ${pauseMs}`;
const TABLETS = 8;
const logTime = (l: LogLine): number => Date.parse(l.time as string);
const say = (text: string): void => void process.stderr.write(`${text}\n`);

interface Kind {
  failoverMs: number[];
  firstCommitMs: number[];
  /**
   * Failovers where the successor became active only after the paused manager resumed: it was stopped
   * inside a write, holding the store's write lock.
   */
  lockWaits: number;
  /** Resumed old managers that neither exited nor stood by again within 15 s (then killed). */
  lingering: number;
}

const cluster = await startBenchCluster({ sessionTimeoutMs });
let stopping = false;
try {
  const result = await run(cluster);
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else report(result);
} finally {
  stopping = true;
  await cluster.stop();
}

async function run(c: BenchCluster) {
  let active = await c.start('manager-0', ['manager'], 'manager active');
  let standby = await startStandby(c, 1);
  const tservers = [
    await c.start('tserver-1', ['tserver'], 'tablet server ready'),
    await c.start('tserver-2', ['tserver'], 'tablet server ready'),
  ];
  const commits: number[] = [];
  for (const t of tservers) t.onLine((l) => l.msg === 'committed' && commits.push(logTime(l)));
  const meta = c.meta;
  await meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
  const splits = Array.from({ length: TABLETS - 1 }, (_, i) => `r${i + 1}`);
  await meta.call('POST', '/v1/tables', { name: 'load', splits, config: { queues: [{ queue: 'q' }] } });
  const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger() });
  while (!(await client.tablets('load')).every((t) => t.loc)) await sleep(100);
  for (const i of [1, 2])
    await c.start(`compactor-${i}`, ['compactor', 'q', '--throughput', '200000'], 'compactor ready');

  // The load: two ingest loops and one admin loop, for the whole run.
  const ingest = { batches: 0, failed: 0, rows: 0, latencies: [] as number[], errors: [] as string[] };
  const admin = { calls: 0, failed: 0, errors: [] as string[] };
  const loops = [
    ...[0, 1].map(async (loop) => {
      for (let n = 0; !stopping; n++) {
        const rows = Array.from({ length: 50 }, (_, i) => ({
          row: `r${n % TABLETS}-${loop}-${n}-${i}`,
          value: 'x'.repeat(100),
        }));
        const started = Date.now();
        try {
          await client.ingest('load', rows);
          ingest.rows += rows.length;
          ingest.latencies.push(Date.now() - started);
        } catch (err) {
          ingest.failed++;
          ingest.errors.push(describeError(err));
        }
        ingest.batches++;
        await sleep(25);
      }
    }),
    (async () => {
      const calls: [string, string, unknown?][] = [
        ['GET', '/v1/tables'],
        ['GET', '/v1/tables/load'],
        ['GET', '/v1/queues/q'],
        ['POST', '/v1/tables/load/config', { config: { ratio: 3 } }],
      ];
      for (let n = 0; !stopping; n++) {
        const [method, path, body] = calls[n % calls.length]!;
        try {
          await meta.call(method, path, body);
        } catch (err) {
          admin.failed++;
          admin.errors.push(describeError(err));
        }
        admin.calls++;
        await sleep(50);
      }
    })(),
  ];
  await sleep(3_000); // compactions under way

  const cli = { runs: 0, failed: 0, errors: [] as string[] };
  const clis: Promise<void>[] = [];
  const kinds: Record<'kill' | 'stop', Kind> = {
    kill: { failoverMs: [], firstCommitMs: [], lockWaits: 0, lingering: 0 },
    stop: { failoverMs: [], firstCommitMs: [], lockWaits: 0, lingering: 0 },
  };
  let next = 2;
  for (const kind of ['kill', 'stop'] as const) {
    for (let i = 0; i < failovers; i++) {
      const old = active;
      const successor = standby;
      const faultAt = Date.now();
      let resumedAt: number | undefined;
      let resumed: Promise<void> = Promise.resolve();
      if (kind === 'kill') old.kill();
      else {
        old.pause();
        resumed = sleep(pauseMs).then(() => {
          resumedAt = Date.now();
          old.resume();
        });
      }
      clis.push(
        runCli(['admin', 'queue', 'list'], { env: c.env, timeoutMs: 120_000 }).then(
          (r) => {
            cli.runs++;
            if (r.code !== 0) {
              cli.failed++;
              cli.errors.push(`exit ${r.code}: ${r.stderr.trim()}`);
            }
          },
          (err: unknown) => {
            cli.runs++;
            cli.failed++;
            cli.errors.push(describeError(err));
          },
        ),
      );
      // After the fault: a standby that was active before (a resumed old manager standing by again) has
      // older such lines.
      const line = await successor.waitForLog(
        (l) => l.msg === 'manager active' && logTime(l) >= faultAt,
        pauseMs + 60_000,
      );
      const activeAt = logTime(line);
      kinds[kind].failoverMs.push(activeAt - faultAt);
      // Measured while the old manager may still be paused: calls stuck on it must not hold anything up.
      while (!commits.some((t) => t >= activeAt)) await sleep(20);
      kinds[kind].firstCommitMs.push(commits.find((t) => t >= activeAt)! - activeAt);
      await resumed;
      if (resumedAt !== undefined && activeAt >= resumedAt) kinds[kind].lockWaits++;
      let reusable: ManagedProcess | undefined;
      if (kind === 'stop') {
        // Resumed, it finds itself fenced: it stops serving, and either exits or stands by again.
        const standsBy = (l: LogLine): boolean =>
          l.msg === 'another manager is active: standing by' && logTime(l) >= resumedAt! - 50;
        const outcome = await Promise.race([
          old.exit.then(() => 'exited' as const),
          old.waitForLog(standsBy, 15_000).then(
            () => 'standby' as const,
            () => 'lingering' as const,
          ),
        ]);
        if (outcome === 'standby') reusable = old;
        if (outcome === 'lingering') {
          kinds[kind].lingering++;
          old.kill();
        }
      }
      say(
        `${kind} ${i + 1}/${failovers}: failover ${activeAt - faultAt} ms, first commit +${kinds[kind].firstCommitMs.at(-1)} ms`,
      );
      active = successor;
      standby = reusable ?? (await startStandby(c, next++));
      await sleep(1_000);
    }
  }
  await Promise.all(clis);
  stopping = true;
  await Promise.all(loops);

  let scanned = 0;
  for await (const _ of client.scan('load')) scanned++;
  return {
    bench: 'failover',
    command,
    sessionTimeoutMs,
    pauseMs,
    failovers,
    kill: summary(kinds.kill),
    sigstop: summary(kinds.stop),
    ingest: {
      batches: ingest.batches,
      failed: ingest.failed,
      latencyMs: {
        p50: percentile(ingest.latencies, 50),
        p99: percentile(ingest.latencies, 99),
        max: Math.max(...ingest.latencies),
      },
      errors: ingest.errors.slice(0, 5),
    },
    admin: { calls: admin.calls, failed: admin.failed, errors: admin.errors.slice(0, 5) },
    cli: { runs: cli.runs, failed: cli.failed, errors: cli.errors.slice(0, 5) },
    rows: { written: ingest.rows, scanned },
  };
}

function startStandby(c: BenchCluster, n: number): Promise<ManagedProcess> {
  return c.start(`manager-${n}`, ['manager'], 'another manager is active: standing by');
}

function summary(k: Kind) {
  const stats = (v: number[]) => ({ p50: percentile(v, 50), p99: percentile(v, 99), max: Math.max(...v) });
  return {
    failoverMs: stats(k.failoverMs),
    firstCommitMs: stats(k.firstCommitMs),
    lockWaits: k.lockWaits,
    lingering: k.lingering,
  };
}

function report(r: Awaited<ReturnType<typeof run>>): void {
  const ms = (s: { p50: number; p99: number; max: number }) =>
    `${fmt(s.p50)} / ${fmt(s.p99)} / ${fmt(s.max)} ms`;
  const rows = (['kill', 'sigstop'] as const).flatMap((kind) => [
    {
      figure: `failover time after ${kind === 'kill' ? 'kill -9' : 'SIGSTOP'}: p50 / p99 / max`,
      value: ms(r[kind].failoverMs),
      baseline: `session timeout ${fmt(r.sessionTimeoutMs)} ms`,
      ratio: `${fmt(r[kind].failoverMs.p99 / r.sessionTimeoutMs, 2)}×`,
      target: `≤ session timeout + 1 s${r[kind].lockWaits ? ` (${r[kind].lockWaits} waited for the store's lock)` : ''}`,
    },
    {
      figure: `first commit after the successor is active (${kind}): p50 / p99 / max`,
      value: ms(r[kind].firstCommitMs),
      target: 'p99 ≤ 1,000 ms',
    },
  ]);
  printRows(
    `bench/failover — session timeout ${r.sessionTimeoutMs} ms, ${r.failovers} failovers of each kind`,
    [
      ...rows,
      {
        figure: 'ingests failed (batches of 50 rows)',
        value: `${r.ingest.failed} of ${fmt(r.ingest.batches)}`,
        baseline: `ingest latency p50 / p99 / max ${ms(r.ingest.latencyMs)}`,
        target: '0',
      },
      {
        figure: 'admin calls failed (MetaClient)',
        value: `${r.admin.failed} of ${fmt(r.admin.calls)}`,
        target: '0',
      },
      {
        figure: 'CLI processes failed (one per failover)',
        value: `${r.cli.failed} of ${r.cli.runs}`,
        target: '0',
      },
      {
        figure: 'rows read back / written',
        value: `${fmt(r.rows.scanned)} / ${fmt(r.rows.written)}`,
        target: 'equal',
      },
    ],
  );
  for (const e of [...r.ingest.errors, ...r.admin.errors, ...r.cli.errors]) say(`error: ${e}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
