/**
 * bench/scale tablets: what a cluster costs as its tablets grow, idle and when a tablet server dies.
 *
 *   npx tsx bench/scale.ts tablets [--tablets 1000,10000] [--idle-seconds 60] [--latency-trials 10] [--json]
 *
 * For each size, a fresh cluster of real processes (an embedded ZooKeeper, a manager and two tablet
 * servers) and one table of that many tablets, created from split points and hosted. Then, at that
 * size:
 *
 * 1. Creating and hosting: the time to create the table (one request) and until every tablet is hosted.
 * 2. Idle: CPU of each process over `--idle-seconds` (from /proc, once the collector has run its first
 *    cycle — a sweep, which builds its reference index — and after 10 s of settling: nothing is ingested,
 *    compacted or asked; the collector runs at its default interval), its resident memory, and the tablet
 *    servers' CPU per hosted tablet.
 * 3. `admin` commands, each run as a whole process three times (the median): `table list`,
 *    `tserver list`, `check`, `table info` (every tablet's row).
 * 4. Pickup and reclaim, `--latency-trials` each, with a real compactor process: pickup from the ingest
 *    that queues a job to an idle compactor's start of it; reclaim from the kill -9 of a compactor in the
 *    middle of a job to another's start of it (each job in a tablet of its own, spread over the table).
 * 5. A tablet server killed with SIGKILL: the time until every one of its tablets is hosted by the other
 *    (its ZooKeeper session, 2 s here, must expire first).
 *
 * The waits for hosting poll what `admin tserver list` shows (the manager's index), and check the store
 * once at the end: the store's whole table read at every poll would load the manager being measured.
 *
 * Every figure is printed beside the first size's, measured in the same run.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import { tableRange, tabletRow } from '../src/meta/keys.js';
import { COL_LOC } from '../src/meta/tablet.js';
import { BIN, type ManagedProcess } from '../test/support/process-group.js';
import { JOB_RATIO, compactionStarted, queueJob } from './jobs.js';
import { fmt, percentile, printRows, startBenchCluster, type BenchCluster, type Row } from './lib.js';

/** CPU seconds a process has used (user + system, from /proc). */
function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function rssOf(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How many of the table's tablets each server hosts, read page by page (cheap beside the tablets view). */
async function hostsOf(c: BenchCluster, tableId: string): Promise<Map<string, number>> {
  const range = tableRange(tableId);
  const hosts = new Map<string, number>();
  for await (const cell of c.meta.scanAll({ start: range.start, end: range.end, colPrefix: COL_LOC })) {
    if (cell.col !== COL_LOC) continue;
    const server = (JSON.parse(cell.value) as { server: string }).server;
    hosts.set(server, (hosts.get(server) ?? 0) + 1);
  }
  return hosts;
}

const total = (hosts: Map<string, number>) => [...hosts.values()].reduce((a, b) => a + b, 0);

/**
 * How many tablets each live server hosts, as `admin tserver list` reads it (the manager's index of
 * activity: no read of the tablets). What the waits poll: a poll of {@link hostsOf} every 250 ms took
 * about half the manager's CPU at 100,000 tablets, and slowed down what it measured.
 */
async function liveHosts(c: BenchCluster): Promise<Map<string, number>> {
  const { tservers } = await c.meta.call<{ tservers: { server: string; tablets: number }[] }>(
    'GET',
    '/v1/tservers',
  );
  return new Map(tservers.map((t) => [t.server, t.tablets]));
}

/** Wall time of one CLI command, as a whole process. */
function timeCli(c: BenchCluster, args: string[]): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...c.env },
      stdio: 'ignore',
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve(performance.now() - started)
        : reject(new Error(`${args.join(' ')} exited ${code}`)),
    );
  });
}

interface SizeFigures {
  tablets: number;
  createMs: number;
  hostMs: number;
  idle: { name: string; cores: number; rssMB: number; hosted?: number }[];
  admin: Record<string, number>;
  /** p50 and p99 over the trials. */
  pickupMs: { p50: number; p99: number };
  reclaimMs: { p50: number; p99: number };
  reassign: { tablets: number; ms: number };
}

/**
 * Pickup and reclaim latencies on the table `t` of `tableId` split at `splits`: `trials` of each, every
 * job in a tablet of its own.
 */
async function latencies(
  c: BenchCluster,
  tableId: string,
  splits: string[],
  trials: number,
): Promise<{ pickup: number[]; reclaim: number[] }> {
  const client = new ExcClient({ meta: c.meta, secret: c.secret, logger: silentLogger() });
  const step = Math.max(1, Math.floor((splits.length - 2) / (2 * trials + 1)));
  let next = 0;
  const fresh = () => {
    const k = ++next * step;
    return { prefix: splits[k]!, tablet: tabletRow(tableId, Buffer.from(splits[k + 1]!)) };
  };
  const heir = await c.start('heir', ['compactor', 'q'], 'compactor ready');
  const pickup: number[] = [];
  for (let i = 0; i < trials; i++) {
    await sleep(300); // idle again, waiting on the manager
    const { prefix, tablet } = fresh();
    const from = await queueJob(client, 't', prefix);
    pickup.push((await compactionStarted(heir, tablet)) - from);
  }
  const reclaim: number[] = [];
  for (let i = 0; i < trials; i++) {
    // The heir must not take the job first: it is paused while the slow compactor reserves it (the job,
    // about 1.5 KB in the files, takes it about 5 s at 300 bytes a second).
    heir.pause();
    const slow = await c.start(`slow-${i}`, ['compactor', 'q', '--throughput', '300'], 'compactor ready');
    const { prefix, tablet } = fresh();
    await queueJob(client, 't', prefix);
    await compactionStarted(slow, tablet);
    heir.resume();
    await sleep(200); // the heir is waiting for work again
    const killedAt = Date.now();
    slow.kill();
    reclaim.push((await compactionStarted(heir, tablet, 60_000)) - killedAt);
    await slow.waitExit();
  }
  heir.signal('SIGTERM');
  await heir.waitExit(30_000).catch(() => undefined);
  return { pickup, reclaim };
}

/** Until the manager's collector has run a cycle (its first, a sweep, builds the reference index). */
async function firstGcCycle(c: BenchCluster): Promise<void> {
  for (;;) {
    const status = await c.meta.call<{ gc: { cycles: number } | null }>('GET', '/v1/status');
    if ((status.gc?.cycles ?? 0) >= 1) return;
    await sleep(1_000);
  }
}

const ADMIN: Record<string, string[]> = {
  'table list': ['admin', 'table', 'list'],
  'tserver list': ['admin', 'tserver', 'list'],
  check: ['admin', 'check'],
  'table info': ['admin', 'table', 'info', 't', '--json'],
};

async function measure(n: number, idleSeconds: number, trials: number): Promise<SizeFigures> {
  // The collector at its default interval (the other benchmarks keep it out of the way).
  const c = await startBenchCluster({ env: { EXC_GC_INTERVAL_MS: '60000' } });
  try {
    const manager = await c.start('manager', ['manager'], 'manager active');
    const tservers: ManagedProcess[] = [];
    for (const i of [1, 2]) tservers.push(await c.start(`tserver-${i}`, ['tserver'], 'tablet server ready'));
    await c.meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
    const splits = Array.from({ length: n - 1 }, (_, i) => `r${String(i + 1).padStart(7, '0')}`);
    let t0 = performance.now();
    const table = await c.meta.call<{ id: string }>('POST', '/v1/tables', {
      name: 't',
      splits,
      config: { queues: [{ queue: 'q' }], ratio: JOB_RATIO },
    });
    const createMs = performance.now() - t0;
    t0 = performance.now();
    while (total(await liveHosts(c)) < n) await sleep(250);
    const hostMs = performance.now() - t0;
    let hosts = await hostsOf(c, table.id);
    if (total(hosts) !== n)
      throw new Error(`the index counted ${n} tablets hosted, the store ${total(hosts)}`);

    await firstGcCycle(c);
    await sleep(10_000);
    const procs = [manager, ...tservers];
    const before = procs.map((p) => cpuOf(p.pid));
    await sleep(idleSeconds * 1000);
    const after = procs.map((p) => cpuOf(p.pid));
    const idle: SizeFigures['idle'] = procs.map((p, i) => ({
      name: p.name,
      cores: (after[i]! - before[i]!) / idleSeconds,
      rssMB: rssOf(p.pid) / 1e6,
    }));

    const admin: Record<string, number> = {};
    for (const [name, args] of Object.entries(ADMIN)) {
      const runs: number[] = [];
      for (let i = 0; i < 3; i++) runs.push(await timeCli(c, args));
      admin[name] = runs.sort((a, b) => a - b)[1]!;
    }
    const { pickup, reclaim } = await latencies(c, table.id, splits, trials);
    const dist = (v: number[]) => ({ p50: percentile(v, 50), p99: percentile(v, 99) });

    // Kill the second tablet server; wait until the first hosts everything.
    const byServer = await hostsOf(c, table.id);
    tservers[1]!.kill();
    t0 = performance.now();
    for (;;) {
      const live = await liveHosts(c);
      if (live.size === 1 && total(live) === n) break;
      if (performance.now() - t0 > 600_000) throw new Error('tablets not reassigned within 10 minutes');
      await sleep(250);
    }
    const reassignMs = performance.now() - t0;
    hosts = await hostsOf(c, table.id);
    if (hosts.size !== 1 || total(hosts) !== n) {
      throw new Error(
        `the index counted every tablet on one server, the store ${JSON.stringify([...hosts])}`,
      );
    }
    const survivor = [...hosts.keys()][0]!;
    const moved = n - byServer.get(survivor)!;
    // The survivor is the first tablet server's process: the tablets it hosted, and those it took.
    idle[1]!.hosted = byServer.get(survivor);
    idle[2]!.hosted = moved;
    for (const p of procs) p.signal('SIGTERM');
    for (const p of procs) await p.waitExit(30_000).catch(() => undefined);
    return {
      tablets: n,
      createMs,
      hostMs,
      idle,
      admin,
      pickupMs: dist(pickup),
      reclaimMs: dist(reclaim),
      reassign: { tablets: moved, ms: reassignMs },
    };
  } finally {
    await c.stop();
  }
}

function rowsOf(f: SizeFigures, base: SizeFigures): Row[] {
  const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b, 2)}×` : '');
  const row = (figure: string, value: number, baseline: number, unit: string, digits = 0): Row => ({
    figure,
    value: `${fmt(value, digits)} ${unit}`,
    baseline: `${fmt(baseline, digits)} ${unit}`,
    ratio: ratio(value, baseline),
  });
  const out: Row[] = [
    row('create the table', f.createMs, base.createMs, 'ms'),
    row('host every tablet', f.hostMs, base.hostMs, 'ms'),
  ];
  f.idle.forEach((p, i) => {
    const b = base.idle[i]!;
    out.push({ ...row(`idle CPU, ${p.name}`, p.cores, b.cores, 'cores', 3), target: i === 0 ? '≤ 2×' : '' });
    out.push(row(`RSS, ${p.name}`, p.rssMB, b.rssMB, 'MB'));
    // What each idle tablet more costs: the manager knows every tablet, a tablet server those it hosts.
    const [tablets, baseTablets] = i === 0 ? [f.tablets, base.tablets] : [p.hosted ?? 0, b.hosted ?? 0];
    if (tablets > baseTablets) {
      out.push({
        figure: `RSS per idle tablet beyond the baseline's, ${p.name}`,
        value: `${fmt(((p.rssMB - b.rssMB) * 1e6) / (tablets - baseTablets))} bytes`,
        baseline: '',
        ratio: '',
      });
    }
    if (p.hosted && b.hosted) {
      out.push({
        ...row(
          `idle CPU per 1,000 hosted tablets, ${p.name}`,
          (p.cores / p.hosted) * 1000,
          (b.cores / b.hosted) * 1000,
          'cores',
          4,
        ),
        target: '≤ 2×',
      });
    }
  });
  for (const [name, ms] of Object.entries(f.admin)) {
    out.push({ ...row(`admin ${name}`, ms, base.admin[name]!, 'ms'), target: '≤ 1,000 ms' });
  }
  for (const [name, f0, b0] of [
    ['pickup (ingest that queues a job → started)', f.pickupMs, base.pickupMs],
    ['reclaim after kill -9 (kill → started elsewhere)', f.reclaimMs, base.reclaimMs],
  ] as const) {
    out.push(row(`${name}: p50`, f0.p50, b0.p50, 'ms'));
    out.push({ ...row(`${name}: p99`, f0.p99, b0.p99, 'ms'), target: '≤ 1.5×' });
  }
  out.push(
    row(
      `reassign a dead server's tablets (${fmt(f.reassign.tablets)})`,
      f.reassign.ms,
      base.reassign.ms,
      'ms',
    ),
  );
  return out;
}

export async function runTabletsBench(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      tablets: { type: 'string', default: '1000,10000' },
      'idle-seconds': { type: 'string', default: '60' },
      'latency-trials': { type: 'string', default: '10' },
      json: { type: 'boolean', default: false },
    },
  });
  const sizes = values.tablets.split(',').map(Number);
  const figures: SizeFigures[] = [];
  for (const n of sizes) {
    process.stderr.write(`${n} tablets...\n`);
    figures.push(await measure(n, Number(values['idle-seconds']), Number(values['latency-trials'])));
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
  for (const f of figures)
    printRows(
      `${fmt(f.tablets)} tablets (baseline: ${fmt(figures[0]!.tablets)}, same run)`,
      rowsOf(f, figures[0]!),
    );
}
