/**
 * bench/scale zk: ZooKeeper with thousands of registered compactors.
 *
 *   npx tsx bench/scale.ts zk [--sessions 0,1000,10000] [--tservers 3] [--reservers 32] [--seconds 10]
 *                             [--trials 10] [--processes 4] [--session-timeout 10000]
 *
 * A real ZooKeeper (the embedded server: one JVM, -Xmx256m, maxClientCnxns=0), a real manager and
 * `--tservers` real tablet servers. For each total in `--sessions`, light clients (bench/scale-clients.ts,
 * `--processes` child processes) bring the registered compactors of one queue up to it, each a session
 * and a protected ephemeral node, as `compactor <queue>` registers. Then, at that size:
 *
 * 1. ZooKeeper's load: connections, znodes and watches (`mntr`), the server's resident memory, and what the
 *    sessions cost the clients' processes.
 * 2. Reservations a second through every tablet server at once: `--reservers` more compactors reserve and
 *    commit trivial jobs (empty outputs: the protocol without file I/O) on the tablets of all the servers,
 *    beside an authenticated no-op round trip to the same servers from as many clients, same run.
 * 3. Time to notice a dead compactor among them, `--trials` times each: one that exits (closes its
 *    session: its node goes at once) and one that crashes (SIGKILL of its process: ZooKeeper must expire
 *    the session, a 2 s one here). Measured from the close or the kill to its job back in the queue, seen
 *    by a long poll of the manager's work finder. Real compactors also keep a link to the tablet server,
 *    which fences a crashed one in about 200 ms (bench/liveness.ts); light clients have none, so this is
 *    ZooKeeper's own path, the backstop.
 *
 * At the end `admin queue delete` removes the queue with every compactor node in it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import type { TabletView } from '../src/meta/views.js';
import type { ReservedJob } from '../src/queue/protocol.js';
import { ZkSession, createProtected, digestAuthFromSecret, fourLetterWord } from '../src/zk/index.js';
import type { ClientsConfig } from './scale-clients.js';
import { fmt, percentile, startBenchCluster, table, throughput, type BenchCluster } from './lib.js';

const CLIENTS = fileURLToPath(new URL('./scale-clients.ts', import.meta.url));

interface Mntr {
  connections: number;
  znodes: number;
  watches: number;
  ephemerals: number;
}

async function mntr(port: number): Promise<Mntr> {
  const text = await fourLetterWord(port, 'mntr', 10_000);
  const get = (key: string): number => Number(new RegExp(`^${key}\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    connections: get('zk_num_alive_connections'),
    znodes: get('zk_znode_count'),
    watches: get('zk_watch_count'),
    ephemerals: get('zk_ephemerals_count'),
  };
}

/** Resident memory of a process, in bytes (from /proc). */
function rssOf(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

/** A child process of light clients, resolved once every session is registered. */
function startClients(config: ClientsConfig): Promise<{ child: ChildProcess; lines: AsyncIterator<string> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CLIENTS], {
    env: { ...process.env, SCALE_CLIENTS: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return (async () => {
    const first = await lines.next();
    if (first.done) throw new Error('a light-client process exited before registering its sessions');
    return { child, lines };
  })();
}

export async function runZkBench(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      sessions: { type: 'string', default: '0,1000,10000' },
      tservers: { type: 'string', default: '3' },
      reservers: { type: 'string', default: '32' },
      seconds: { type: 'string', default: '10' },
      trials: { type: 'string', default: '10' },
      files: { type: 'string', default: '40' },
      processes: { type: 'string', default: '4' },
      'session-timeout': { type: 'string', default: '10000' },
    },
  });
  const sizes = values.sessions.split(',').map(Number);
  const tserverCount = Number(values.tservers);
  const reserverCount = Number(values.reservers);
  const seconds = Number(values.seconds);
  const trials = Math.min(99, Number(values.trials));
  const processCount = Number(values.processes);
  const filesPerTablet = Number(values.files);
  const sessionTimeoutMs = Number(values['session-timeout']);
  const crashTimeoutMs = 2_000;

  const cluster = await startBenchCluster({ sessionTimeoutMs });
  const children: ChildProcess[] = [];
  const zkPort = Number(cluster.zk.connectString.split(':').pop());
  try {
    await cluster.start('manager', ['manager'], 'manager active');
    const meta = cluster.meta;
    // Every server up before the tables exist, so that their tablets are spread over all of them.
    await Promise.all(
      Array.from({ length: tserverCount }, (_, i) =>
        cluster.start(`tserver-${i}`, ['tserver'], 'tablet server ready'),
      ),
    );
    await new Promise((r) => setTimeout(r, 1_000)); // the manager sees them all
    const queue = await meta.call<{ id: string }>('POST', '/v1/queues', { name: 'scale', bins: 8 });
    const noticeQueue = await meta.call<{ id: string }>('POST', '/v1/queues', { name: 'notice', bins: 1 });
    const splits = Array.from({ length: tserverCount * 50 - 1 }, (_, i) => `t${String(i).padStart(5, '0')}`);
    await meta.call('POST', '/v1/tables', {
      name: 'scale',
      splits,
      config: { queues: [{ queue: 'scale' }], ratio: 1, maxFiles: 2, fileLimit: 10_000 },
    });
    await meta.call('POST', '/v1/tables', {
      name: 'notice',
      config: { queues: [{ queue: 'notice' }], ratio: 1, maxFiles: 2, maxAttempts: 100 },
    });
    const tabletsOf = async (name: string) =>
      (await meta.call<{ tablets: TabletView[] }>('GET', `/v1/tables/${name}`)).tablets;
    let tablets: TabletView[] = [];
    for (;;) {
      tablets = [...(await tabletsOf('scale')), ...(await tabletsOf('notice'))];
      if (tablets.every((t) => t.loc)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const urlOf = (t: TabletView) => `http://${t.loc!.server}`;
    const servers = [...new Set(tablets.map(urlOf))];
    if (servers.length !== tserverCount) throw new Error(`tablets on ${servers.length} servers`);
    const rpc = new Map(servers.map((u) => [u, cluster.client(u)]));
    const scaleTablets = tablets.filter((t) => t.tableId === tablets[0]!.tableId);
    const noticeTablet = tablets.find((t) => t.tableId !== tablets[0]!.tableId)!;
    // Files come through the real ingest path (the tablets are hosted): each call writes one file in
    // every tablet it touches.
    const client = new ExcClient({ meta, secret: cluster.secret, logger: silentLogger() });
    const rowsOfScale = [...splits, 'u'];
    const addFiles = async (table: string, rows: string[], files: number) => {
      for (let f = 0; f < files; f++)
        await client.ingest(
          table,
          rows.map((row) => ({ row, value: 'v', ts: f + 1 })),
        );
    };
    await addFiles('notice', ['n'], 2);

    const register = (n: number, queueId = queue.id, timeout = 4_000) =>
      Promise.all(
        Array.from({ length: n }, async () => {
          const session = await ZkSession.connect({
            connectString: cluster.zk.connectString,
            sessionTimeoutMs: timeout,
            auth: digestAuthFromSecret(cluster.secret),
          });
          const { path } = await createProtected(session, cluster.layout.queueNode(queueId), 'c-', '{}');
          return { session, path };
        }),
      );
    const reservers = await register(reserverCount);
    const zkPid = zkPidOf(cluster);
    const results: string[][] = [];
    let registered = 0;
    for (const size of sizes) {
      // 1. Bring the registered light clients up to `size`.
      const add = size - registered;
      let registerRate = NaN;
      if (add > 0) {
        const started = Date.now();
        const per = Math.ceil(add / processCount);
        const launched = await Promise.all(
          Array.from({ length: processCount }, (_, i) => Math.min(per, add - i * per))
            .filter((n) => n > 0)
            .map((count) =>
              startClients({
                connectString: cluster.zk.connectString,
                secret: cluster.secret,
                queueNode: cluster.layout.queueNode(queue.id),
                count,
                sessionTimeoutMs,
                concurrency: 50,
              }),
            ),
        );
        children.push(...launched.map((l) => l.child));
        registerRate = add / ((Date.now() - started) / 1000);
        registered = size;
      }
      await new Promise((r) => setTimeout(r, 2_000));
      const load = await mntr(zkPort);
      const zkRss = zkPid ? rssOf(zkPid) : NaN;
      const clientRss = children.reduce((n, c) => n + (c.pid ? rssOf(c.pid) : 0), 0);

      // 2. Reservations through every server at once, beside no-op round trips to the same servers.
      const filesBefore = Date.now();
      await addFiles('scale', rowsOfScale, filesPerTablet);
      const filesSeconds = (Date.now() - filesBefore) / 1000;
      const noop = await throughput(reserverCount, 3_000, (loop) =>
        rpc.get(servers[loop % servers.length]!)!.get('/v1/ping'),
      );
      let cycles = 0;
      const deadline = Date.now() + seconds * 1_000;
      const started = process.hrtime.bigint();
      // Each reserver goes round its share of the tablets until a whole round finds no job (or time is up).
      await Promise.all(
        reservers.map(async (c, l) => {
          const mine = scaleTablets.filter((_, i) => i % reserverCount === l);
          let idle = 0;
          for (let k = 0; mine.length > 0 && idle < mine.length && Date.now() < deadline; k++) {
            const t = mine[k % mine.length]!;
            const ts = rpc.get(urlOf(t))!;
            const { job } = await ts.post<{ job: ReservedJob | null }>('/v1/reserve', {
              tablet: t.tablet,
              queueId: queue.id,
              compactor: c.path,
            });
            if (!job) {
              idle++;
              continue;
            }
            idle = 0;
            await ts.post('/v1/commit', {
              tablet: t.tablet,
              ecid: job.ecid,
              compactor: c.path,
              output: null,
            });
            cycles++;
          }
        }),
      );
      const cycleRate = cycles / (Number(process.hrtime.bigint() - started) / 1e9);
      const watches = (await mntr(zkPort)).watches;

      // 3. Time to notice a dead compactor: one that exits, one that crashes.
      const noticeTs = rpc.get(urlOf(noticeTablet))!;
      const waitBack = () =>
        meta.call<{ work: unknown }>(
          'POST',
          '/v1/queues/next',
          { queueId: noticeQueue.id, bins: 1, startBin: 0, waitMs: 20_000 },
          { idempotent: true, timeoutMs: 25_000 },
        );
      const exits: number[] = [];
      const crashes: number[] = [];
      for (let i = 0; i < Math.floor(trials / sizes.length); i++) {
        const [c] = await register(1, noticeQueue.id);
        const { job } = await noticeTs.post<{ job: ReservedJob | null }>('/v1/reserve', {
          tablet: noticeTablet.tablet,
          queueId: noticeQueue.id,
          compactor: c!.path,
        });
        if (!job) throw new Error('no job to reserve for the exit trial');
        const back = waitBack();
        await new Promise((r) => setTimeout(r, 20)); // the long poll is waiting
        const t0 = process.hrtime.bigint();
        await c!.session.close();
        if (!(await back).work) throw new Error('the job did not come back');
        exits.push(Number(process.hrtime.bigint() - t0) / 1e6);

        const crash = await startClients({
          connectString: cluster.zk.connectString,
          secret: cluster.secret,
          queueNode: cluster.layout.queueNode(noticeQueue.id),
          count: 1,
          sessionTimeoutMs: crashTimeoutMs,
          concurrency: 1,
          reserve: { url: urlOf(noticeTablet), tablet: noticeTablet.tablet, queueId: noticeQueue.id },
        });
        const reserved = JSON.parse((await crash.lines.next()).value as string) as {
          reserved: string | null;
        };
        if (!reserved.reserved) throw new Error('no job to reserve for the crash trial');
        const crashBack = waitBack();
        await new Promise((r) => setTimeout(r, 20));
        const t1 = process.hrtime.bigint();
        crash.child.kill('SIGKILL');
        if (!(await crashBack).work) throw new Error('the job of the crashed client did not come back');
        crashes.push(Number(process.hrtime.bigint() - t1) / 1e6);
      }

      const p = (xs: number[]) => `${fmt(percentile(xs, 50))} / ${fmt(percentile(xs, 99))}`;
      results.push([
        fmt(size),
        Number.isNaN(registerRate) ? '—' : fmt(registerRate),
        fmt(load.connections),
        fmt(load.znodes),
        fmt(load.ephemerals),
        fmt(watches),
        fmt(zkRss / 2 ** 20),
        size > 0 ? fmt(clientRss / 2 ** 20) : '—',
        `${fmt(cycleRate)} (${fmt(cycleRate / noop.perSecond, 2)}×)`,
        p(exits),
        p(crashes),
      ]);
      process.stdout.write(
        `${fmt(size)} sessions: ${fmt(cycles)} reservations at ${fmt(cycleRate)} / s ` +
          `(files ingested in ${fmt(filesSeconds, 1)} s)\n`,
      );
    }

    const deleted = Date.now();
    const outcome = await meta
      .call('DELETE', '/v1/queues/scale?force=true', undefined)
      .then(() => `deleted in ${fmt((Date.now() - deleted) / 1000, 1)} s`)
      .catch((err: Error) => `failed: ${err.message}`);

    process.stdout.write(
      `\nbench/scale zk — ${tserverCount} tablet servers, ${reserverCount} reserving compactors, ` +
        `light clients in ${processCount} processes, session timeout ${sessionTimeoutMs} ms\n\n`,
    );
    process.stdout.write(
      table(
        [
          'sessions',
          'registered / s',
          'connections',
          'znodes',
          'ephemerals',
          'watches',
          'ZK RSS MB',
          'clients RSS MB',
          `reservations / s (× ${reserverCount} no-op RPCs)`,
          'exit noticed p50 / p99 ms',
          `crash (${crashTimeoutMs / 1000} s session) noticed p50 / p99 ms`,
        ],
        results,
      ),
    );
    process.stdout.write(`\nadmin queue delete with ${fmt(registered)} compactors registered: ${outcome}\n`);
    await Promise.all(reservers.map((c) => c.session.close().catch(() => undefined)));
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await cluster.stop();
  }
}

function zkPidOf(cluster: BenchCluster): number | undefined {
  return 'pid' in cluster.zk ? (cluster.zk as { pid: number }).pid : undefined;
}
