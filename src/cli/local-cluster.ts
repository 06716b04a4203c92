/**
 * The cluster `excompact local` runs (see local.ts for the command): ZooKeeper, the object store, the
 * processes under a supervisor, the demo workload and the summary.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { ExcClient, type ClientEntry } from '../client/client.js';
import { describeDatabase, requireSecret } from '../config.js';
import { ExcError, describeError } from '../errors.js';
import { onShutdownSignals } from '../lifecycle.js';
import { silentLogger } from '../log.js';
import { MetaClient } from '../meta/client.js';
import type { TableInfo, TabletView } from '../meta/views.js';
import type { QueueInfo } from '../queue/registry.js';
import { PeerClients } from '../rpc/peers.js';
import { sleep } from '../retry.js';
import {
  ZkLayout,
  ZkSession,
  digestAuthFromSecret,
  startEmbeddedZooKeeper,
  type EmbeddedZooKeeper,
} from '../zk/index.js';
import { configFrom } from './connect.js';
import { formatTable } from './format.js';
import { startMonitor } from '../monitor/start.js';
import { localSecret, preferredPort, startLocalS3 } from './local-services.js';
import { Supervised, type ChildSpec } from './supervisor.js';

export interface LocalFlags {
  dataDir: string;
  zkPort?: number;
  s3?: boolean;
  postgres?: boolean;
  tservers: number;
  compactors: number;
  workload: boolean;
  summaryEvery: number;
  monitorPort: number;
}

const CLI = fileURLToPath(new URL('./main.js', import.meta.url));

export async function runLocal(flags: LocalFlags, cmd: Command): Promise<void> {
  const dataDir = resolve(flags.dataDir);
  const logDir = join(dataDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const base = configFrom(cmd);
  // The instance's own secret when EXC_SECRET, EXC_SECRET_FILE or --secret-file names one (a file that cannot
  // be read is an error, not a reason to make up another); else one kept in the data directory.
  const secret = base.secret || base.secretFile ? requireSecret(base) : localSecret(dataDir);
  const secretHint = base.secret ? '' : ` EXC_SECRET_FILE=${base.secretFile ?? join(dataDir, 'secret')}`;
  const say = (line: string): void => void process.stdout.write(`${line}\n`);
  const stops: (() => Promise<void>)[] = [];
  let stopping = false;
  const stopAll = async (): Promise<number> => {
    stopping = true;
    say('\nexcompact local: stopping…');
    for (const stop of stops.reverse()) await stop().catch((err: unknown) => say(`  ${describeError(err)}`));
    say('excompact local: stopped');
    return 0;
  };
  onShutdownSignals(silentLogger(), stopAll, { forceAfterMs: 60_000 });

  say(`excompact local — data in ${dataDir}`);

  // ZooKeeper.
  let zkConnect = process.env.EXC_ZK;
  if (!zkConnect) {
    const zk: EmbeddedZooKeeper = await startEmbeddedZooKeeper({
      dataDir: join(dataDir, 'zookeeper'),
      port: flags.zkPort ?? (await preferredPort(2181)),
      tickTimeMs: 500,
      logFile: join(logDir, 'zookeeper.log'),
    });
    stops.push(() => zk.stop());
    zkConnect = zk.connectString;
  }
  say(`  zookeeper     ${zkConnect}${process.env.EXC_ZK ? ' (EXC_ZK)' : ' (embedded)'}`);

  // Object store.
  const storeEnv: Record<string, string | undefined> = {};
  if (flags.s3) {
    if (process.env.EXC_S3_ENDPOINT && base.store.startsWith('s3://')) {
      say(`  object store  ${base.store} at ${process.env.EXC_S3_ENDPOINT}`);
    } else {
      const s3 = await startLocalS3(join(dataDir, 's3'));
      stops.push(s3.stop);
      Object.assign(storeEnv, s3.env);
      say(`  object store  ${s3.env.EXC_STORE} (embedded S3 server at ${s3.env.EXC_S3_ENDPOINT})`);
    }
  } else {
    storeEnv.EXC_STORE = base.store.startsWith('file://./data')
      ? `file://${join(dataDir, 'store')}`
      : base.store;
    mkdirSync(storeEnv.EXC_STORE.slice('file://'.length), { recursive: true });
    say(`  object store  ${storeEnv.EXC_STORE}`);
  }

  // Metadata store.
  let metaUrl = process.env.EXC_META;
  if (flags.postgres && !metaUrl) {
    const { startEmbeddedPostgres } = await import('../meta/embedded-postgres.js');
    const pg = await startEmbeddedPostgres({ dir: join(dataDir, 'postgres') });
    // Stopped last: the manager writes until it stops.
    stops.unshift(() => pg.stop());
    metaUrl = await pg.database('excompact');
  }
  say(
    `  metadata      ${metaUrl ? `${describeDatabase(metaUrl)}${process.env.EXC_META ? ' (EXC_META)' : ' (embedded PostgreSQL)'}` : `SQLite in ${join(dataDir, 'manager')}`}`,
  );

  const env: Record<string, string | undefined> = {
    EXC_ZK: zkConnect,
    ...(metaUrl ? { EXC_META: metaUrl } : {}),
    EXC_ZK_ROOT: base.zkRoot,
    EXC_SECRET: secret,
    EXC_DATA_DIR: join(dataDir, 'manager'),
    EXC_GC_GRACE_MS: process.env.EXC_GC_GRACE_MS ?? '60000',
    EXC_GC_INTERVAL_MS: process.env.EXC_GC_INTERVAL_MS ?? '30000',
    ...storeEnv,
  };
  const children: Supervised[] = [];
  const launch = async (spec: Omit<ChildSpec, 'env'>): Promise<Supervised> => {
    const s = new Supervised({ ...spec, env }, CLI, logDir, (m) => !stopping && say(`  ! ${m}`));
    children.push(s);
    await s.start();
    return s;
  };
  stops.push(async () => {
    // Compactors first (they release their jobs), then tablet servers, then the manager.
    const order = (name: string) => (name.startsWith('compactor') ? 0 : name.startsWith('tserver') ? 1 : 2);
    for (const rank of [0, 1, 2])
      await Promise.all(children.filter((c) => order(c.spec.name) === rank).map((c) => c.stop()));
  });

  const manager = await launch({
    name: 'manager',
    args: ['manager'],
    ready: (l) => l.msg === 'manager active',
  });
  say(`  manager       ${String(manager.info.url)} (log ${manager.logFile})`);
  for (let i = 1; i <= flags.tservers; i++) {
    const t = await launch({
      name: `tserver-${i}`,
      args: ['tserver'],
      ready: (l) => l.msg === 'tablet server ready',
    });
    say(`  tserver-${i}     ${String(t.info.name)}`);
  }

  // Queues and the demo table (kept from an earlier run when they exist).
  const layout = new ZkLayout(base.zkRoot);
  const session = await ZkSession.connect({
    connectString: zkConnect,
    sessionTimeoutMs: base.zkSessionTimeoutMs,
    auth: digestAuthFromSecret(secret),
  });
  stops.push(() => session.close());
  const meta = new MetaClient({ session, layout, secret, logger: silentLogger() });
  for (const [name, bins] of [
    ['small', 4],
    ['large', 2],
  ] as const) {
    await meta.call('POST', '/v1/queues', { name, bins }).catch((err: unknown) => {
      if (!(err instanceof ExcError && err.code === 'ALREADY_EXISTS')) throw err;
    });
  }
  await meta
    .call('POST', '/v1/tables', {
      name: 'demo',
      splits: ['d', 'h', 'm', 'r', 'w'],
      config: {
        // 64 KiB of input: with zstd files (the default codec), about what 256 KiB was uncompressed, so
        // that both queues get work within the demo's first minute.
        queues: [{ queue: 'small', maxInputBytes: 64 * 1024 }, { queue: 'large' }],
        ratio: 2,
        maxFiles: 8,
        versions: 1,
      },
    })
    .catch((err: unknown) => {
      if (!(err instanceof ExcError && err.code === 'ALREADY_EXISTS')) throw err;
    });
  say('  queues        small (jobs up to 64 KiB of input), large (the rest)');
  say('  table         demo: 6 tablets, routed to small and large by input size');

  for (const queue of ['small', 'large']) {
    for (let i = 1; i <= flags.compactors; i++) {
      await launch({
        name: `compactor-${queue}-${i}`,
        args: ['compactor', queue],
        ready: (l) => l.msg === 'compactor ready',
      });
    }
  }
  say(`  compactors    ${flags.compactors} for small, ${flags.compactors} for large`);
  const monitor = await startMonitor({
    meta,
    secret,
    host: '127.0.0.1',
    port: flags.monitorPort,
    logger: silentLogger(),
  }).catch((err: unknown) => {
    // The port is taken (a monitor of another cluster): any free one will do.
    if (flags.monitorPort !== 0 && err instanceof ExcError && err.code === 'UNAVAILABLE')
      return startMonitor({ meta, secret, host: '127.0.0.1', port: 0, logger: silentLogger() });
    throw err;
  });
  stops.push(() => monitor.close());
  say(`  monitor       ${monitor.url}`);
  say(`  logs          ${logDir}`);
  say(`  admin         EXC_ZK=${zkConnect}${secretHint} node bin/excompact.js admin queue list`);
  say('excompact local: ready. Ctrl-C stops everything.\n');

  const client = new ExcClient({ meta, secret, logger: silentLogger() });
  const workload = flags.workload ? startWorkload(client, (m) => !stopping && say(`  ! ${m}`)) : undefined;
  if (workload) stops.push(workload.stop);
  // Short timeouts and no retries: a slow tablet server must not hold up (or pile up) the summary.
  const tservers = new PeerClients({ secret, timeoutMs: 2_000, attempts: 1 });
  const rates: Rates = { at: 0, completed: {} };
  const summary = setInterval(() => {
    if (stopping) return;
    void printSummary(meta, tservers, workload?.written ?? (() => 0), monitor.url, rates).catch(
      (err: unknown) => say(`  ! summary: ${describeError(err)}`),
    );
  }, flags.summaryEvery);
  stops.push(async () => clearInterval(summary));
}

/** The demo workload: small batches of random rows, overwrites and some deletes, a few per second. */
function startWorkload(
  client: ExcClient,
  warn: (m: string) => void,
): { stop: () => Promise<void>; written: () => number } {
  let running = true;
  let written = 0;
  const done = (async () => {
    let batch = 0;
    while (running) {
      const entries: ClientEntry[] = [];
      const ts = Date.now();
      for (let i = 0; i < 200; i++) {
        const row = `${String.fromCharCode(97 + randomInt(26))}${String(randomInt(5_000)).padStart(4, '0')}`;
        entries.push(
          batch % 10 === 9 && i % 4 === 0
            ? { row, cf: 'f', cq: 'q', ts, delete: true }
            : { row, cf: 'f', cq: 'q', ts, value: randomBytes(48).toString('hex') },
        );
      }
      try {
        written += await client.ingest('demo', entries);
      } catch (err) {
        warn(`workload: ${describeError(err)}`);
        await sleep(1_000);
      }
      batch++;
      await sleep(150);
    }
  })();
  return {
    written: () => written,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

/** The completed counts of the previous summary, for the per-minute rates. */
interface Rates {
  at: number;
  completed: Record<string, number>;
}

async function printSummary(
  meta: MetaClient,
  tservers: PeerClients,
  written: () => number,
  monitorUrl: string,
  rates: Rates,
): Promise<void> {
  const [{ queues }, { tablets }, { tservers: live }] = await Promise.all([
    meta.call<{ queues: (QueueInfo & { queued: number; running: number; compactors: number })[] }>(
      'GET',
      '/v1/queues',
    ),
    meta.call<{ table: TableInfo; tablets: TabletView[] }>('GET', '/v1/tables/demo'),
    meta.call<{ tservers: { server: string }[] }>('GET', '/v1/tservers'),
  ]);
  const completed: Record<string, number> = {};
  await Promise.all(
    live.map(async ({ server }) => {
      type Status = { reservations?: { committedByQueue?: Record<string, number> } };
      const status = await tservers
        .get(server)
        .get<Status>('/v1/status')
        .catch((): Status => ({}));
      for (const [q, n] of Object.entries(status.reservations?.committedByQueue ?? {}))
        completed[q] = (completed[q] ?? 0) + n;
    }),
  );
  const now = Date.now();
  // Commits per minute since the previous summary (a tablet server's counts restart with it: never < 0).
  const perMinute = (id: string): string =>
    rates.at === 0
      ? '-'
      : (
          Math.max(0, (completed[id] ?? 0) - (rates.completed[id] ?? 0)) /
          ((now - rates.at) / 60_000)
        ).toFixed(1);
  const text = [
    `── ${new Date().toISOString().slice(11, 19)} ─ ${written()} entries written by the workload ─ monitor ${monitorUrl}\n`,
    formatTable(
      ['TABLET', 'FILES', 'BYTES', 'HOST'],
      tablets.map((t) => [
        t.tablet,
        t.files.length,
        t.files.reduce((s, f) => s + f.size, 0),
        t.loc?.server ?? '(moving)',
      ]),
    ),
    formatTable(
      ['QUEUE', 'QUEUED', 'RUNNING', 'COMPLETED', 'PER MIN', 'COMPACTORS'],
      queues.map((q) => [q.name, q.queued, q.running, completed[q.id] ?? 0, perMinute(q.id), q.compactors]),
    ),
  ].join('');
  const first = rates.at === 0;
  rates.at = now;
  rates.completed = completed;
  // On a terminal the summary redraws in place: cursor home, the new text, then clear what the longer
  // previous one left below it (no full clear first, so it does not flicker). Otherwise plain lines.
  const tty = process.stdout.isTTY;
  const frame = `${text}\n(Ctrl-C stops everything)\n`.replace(/\n/g, '\x1b[K\n'); // each line cleared to its end
  process.stdout.write(tty ? `${first ? '\x1b[2J' : ''}\x1b[H${frame}\x1b[J` : `${text}\n`);
}
