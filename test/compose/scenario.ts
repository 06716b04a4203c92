/**
 * The compose scenario: what an operator does with the shipped compose file, and what the README promises
 * each time.
 *
 *  1. up -d: ZooKeeper, the S3 server, a manager and a standby, two tablet servers, a compactor pool per
 *     queue, and `init`; every health check passes.
 *  2. Ingest through `compose run --rm admin`; compactions commit.
 *  3. `docker kill` a compactor container while it runs a job: the job is cancelled (its compactor is
 *     gone) and its tablet's work is committed by another compactor.
 *  4. up -d --scale compactor-small=4: four compactors in `admin compactors list`.
 *  5. `docker kill` the active manager's container: the standby becomes active and serves.
 *  6. admin queue delete large: its compactor containers exit 0 and stay stopped (no restart loop).
 *  7. A scan through `compose run --rm admin` returns exactly what was written.
 *  8. With the `postgres` profile: the metadata is in the database, and the managers' volume holds no
 *     SQLite store.
 */
import { FIXED_PORTS, type Cluster, type Container } from './cluster.js';
import { ComposeTestError, run, say, sleep, waitFor } from './run.js';

interface Compactor {
  path: string;
  queue: string;
  /** The compactor's status URL: http://<host>:<port>. */
  status: string | null;
}
/** What a compactor's signed GET /v1/status says (the fields the scenario reads). */
interface CompactorStatus {
  compactor: string | null;
  jobs: { ecid: string; tablet: string }[];
}
interface History {
  outcomes: {
    ecid: string;
    tablet: string;
    outcome: 'committed' | 'cancelled';
    reason?: string;
    compactor: string;
  }[];
  counts: { committed: number; cancelled: Record<string, number> };
}

/** What the test wrote: row → value. */
const written = new Map<string, string>();
/** One row prefix in each tablet of `demo` (split at d,h,m,r,w). */
const PREFIXES = ['a', 'e', 'j', 'o', 't', 'y'];

/**
 * `rows` rows in each tablet. The client sends a tablet at most 5,000 entries per request and each request
 * becomes a file, so 20,001 rows make five files per tablet: enough for a compaction whatever the sizes.
 */
function entries(n: number, rows: number): string {
  const lines: string[] = [];
  for (const prefix of PREFIXES)
    for (let i = 0; i < rows; i++) {
      const row = `${prefix}${String(i).padStart(6, '0')}`;
      const value = `${n}-${row}-${'v'.repeat(24)}`;
      written.set(row, value);
      lines.push(JSON.stringify({ row, value }));
    }
  return `${lines.join('\n')}\n`;
}

const history = (cluster: Cluster) =>
  cluster.admin<History>(['compactions', 'history', '--since', '1h', '--table', 'demo', '--limit', '1000']);

export async function runScenario(cluster: Cluster): Promise<void> {
  written.clear();
  const postgres = cluster.metadata === 'postgres';
  await cluster.compose(['down', '-v', '--remove-orphans', '--timeout', '5'], { allowFailure: true });
  await cluster.checkPorts();

  say(
    `1. up -d: zookeeper, s3, ${postgres ? 'postgres, ' : ''}manager, manager-standby, tserver x2, ` +
      'compactor-small x2, compactor-large x2, init',
  );
  await cluster.compose(['up', '-d'], { timeoutMs: 300_000 });
  const pools = { 'compactor-small': 2, 'compactor-large': 2 };
  await cluster.waitHealthy(
    {
      zookeeper: 1,
      s3: 1,
      ...(postgres ? { postgres: 1 } : {}),
      manager: 1,
      'manager-standby': 1,
      tserver: 2,
      ...pools,
    },
    120_000,
  );
  say('   every health check passes');

  say('2. ingest through compose run --rm admin');
  const ports = new Map<number, Container>();
  for (const c of await cluster.running('compactor-small')) ports.set(await cluster.portOf(c), c);
  // Compactions start while the ingest runs (a tablet's third file makes a job): look for one at once.
  const ingested = cluster.compose(['run', '--rm', '-T', 'admin', 'ingest', 'demo'], {
    input: entries(0, 20_001),
    timeoutMs: 300_000,
  });
  ingested.catch(() => undefined); // awaited below; a failure meanwhile must not go unhandled

  say('3. docker kill a compactor container in the middle of a job');
  // Each compactor's /metrics (host network, no signature needed) says whether it runs a job right now;
  // its signed /v1/status says which job, under which node: the job is followed by its ECID, since a
  // compactor that lost its session under load registers again under another node.
  const victim = await waitFor(
    'a compactor running a job',
    60_000,
    async () => {
      for (const [port, container] of ports) {
        const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
        if (!/^excompact_compactor_running_jobs(\{[^}]*\})? [1-9]/m.test(metrics)) continue;
        const status = await cluster.rpc(`http://127.0.0.1:${port}`).get<CompactorStatus>('/v1/status');
        const job = status.jobs[0];
        if (job && status.compactor) return { port, container, job, path: status.compactor };
      }
      return undefined;
    },
    100,
  );
  await run('docker', ['kill', victim.container.id]);
  say(`   killed ${victim.container.name} while it ran ${victim.job.ecid} on tablet ${victim.job.tablet}`);
  await ingested;
  say(`   ${written.size} rows written`);
  const reclaimed = await waitFor(
    'its job cancelled, and the tablet committed by another compactor',
    90_000,
    async () => {
      const h = await history(cluster);
      if (h.outcomes.some((o) => o.ecid === victim.job.ecid && o.outcome === 'committed'))
        throw new ComposeTestError(
          'SCENARIO',
          `${victim.job.ecid} committed: the kill landed after the job ended (slow the compactor down)`,
        );
      const cancelled = h.outcomes.find((o) => o.ecid === victim.job.ecid && o.outcome === 'cancelled');
      if (cancelled && cancelled.compactor !== victim.path)
        throw new ComposeTestError('SCENARIO', `${cancelled.ecid} was held by ${cancelled.compactor}`);
      const redone =
        cancelled &&
        h.outcomes.find(
          (o) => o.tablet === cancelled.tablet && o.outcome === 'committed' && o.compactor !== victim.path,
        );
      return redone ? { cancelled, redone, committed: h.counts.committed } : undefined;
    },
  );
  say(
    `   ${reclaimed.cancelled.ecid} cancelled (${reclaimed.cancelled.reason}); tablet ${reclaimed.cancelled.tablet} ` +
      `compacted by ${reclaimed.redone.ecid} on another compactor; committed so far: ${reclaimed.committed}`,
  );

  say('4. up -d --scale compactor-small=4');
  await cluster.compose(['up', '-d', '--scale', 'compactor-small=4'], { timeoutMs: 300_000 });
  await waitFor(
    'four small compactors listed',
    90_000,
    async () => {
      const listed = await cluster.compose([
        'run',
        '--rm',
        '-T',
        'admin',
        'admin',
        'compactors',
        'list',
        '--queue',
        'small',
        '--json',
      ]);
      const n = (JSON.parse(listed.stdout) as Compactor[]).length;
      if (n !== 4) throw new Error(`${n} listed`);
      return n;
    },
    1_000,
  );
  say('   admin compactors list --queue small: 4');

  say('5. docker kill the active manager container');
  const managers = [...(await cluster.running('manager')), ...(await cluster.running('manager-standby'))];
  const states = await Promise.all(managers.map((m) => managerState(cluster, m)));
  const active = managers[states.indexOf('active')];
  const standby = managers[states.indexOf('standby')];
  if (!active || !standby)
    throw new ComposeTestError('SCENARIO', `managers not active + standby: ${states.join(', ')}`);
  const killedAt = Date.now();
  await run('docker', ['kill', active.id]);
  await waitFor('the standby manager active', 60_000, async () =>
    (await managerState(cluster, standby)) === 'active' ? true : undefined,
  );
  const takeover = ((Date.now() - killedAt) / 1000).toFixed(1);
  await cluster.exec(standby, ['excompact', 'ingest', 'demo'], { input: entries(1, 500), stdin: true });
  say(
    `   ${standby.name} active ${takeover} s after the kill (seen through docker exec), and serving ingest`,
  );

  say('6. admin queue delete large: its compactors stop cleanly');
  await cluster.adminText(['queue', 'delete', 'large', '--force']);
  const stopped = await waitFor('compactor-large containers exited', 60_000, async () => {
    const pool = await cluster.containers('compactor-large');
    return pool.length === 2 && pool.every((c) => c.status === 'exited') ? pool : undefined;
  });
  await sleep(4_000); // a restart policy that restarts them would have done so by now
  const after = await cluster.containers('compactor-large');
  for (const c of after) {
    const before = stopped.find((s) => s.id === c.id);
    if (c.status !== 'exited' || c.exitCode !== 0 || c.restartCount !== before?.restartCount)
      throw new ComposeTestError(
        'SCENARIO',
        `${c.name} after queue delete: ${c.status}, exit ${c.exitCode}, restarted ${c.restartCount} times`,
      );
  }
  say(`   ${after.map((c) => c.name).join(', ')}: exited 0, not restarted`);

  say('7. scan through compose run --rm admin: exactly what was written');
  const { stdout } = await cluster.compose(['run', '--rm', '-T', 'admin', 'scan', 'demo']);
  const scanned = stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { row: string; value: string });
  const mismatches = scanned.filter((e) => written.get(e.row) !== e.value).length;
  if (scanned.length !== written.size || mismatches > 0)
    throw new ComposeTestError(
      'SCENARIO',
      `scan: ${scanned.length} rows for ${written.size} written, ${mismatches} with another value`,
    );
  const final = await history(cluster);
  say(`   ${scanned.length} rows equal; ${final.counts.committed} compactions committed in all`);
  if (postgres) await checkMetadataInPostgres(cluster, standby);
}

/** With the `postgres` profile the metadata is in the database, and the managers' volume holds none. */
async function checkMetadataInPostgres(cluster: Cluster, manager: Container): Promise<void> {
  say("8. the metadata is in PostgreSQL, not on the managers' volume");
  const [db] = await cluster.running('postgres');
  if (!db) throw new ComposeTestError('SCENARIO', 'no postgres container is running');
  // Through the server's Unix socket, which trusts local users (the image's pg_hba.conf).
  const sql = 'SELECT count(*) FROM cells';
  const psql = [
    'psql',
    '-p',
    String(FIXED_PORTS.postgres),
    '-U',
    'excompact',
    '-d',
    'excompact',
    '-tAc',
    sql,
  ];
  const { stdout } = await cluster.exec(db, psql);
  const cells = Number(stdout.trim());
  if (!(cells > 0)) throw new ComposeTestError('SCENARIO', `the cells table holds ${stdout.trim()} rows`);
  const { stdout: files } = await cluster.exec(manager, ['ls', '-A', '/var/lib/excompact']);
  if (/metadata\.sqlite/.test(files))
    throw new ComposeTestError('SCENARIO', `a SQLite store on the managers' volume: ${files.trim()}`);
  say(`   ${cells} metadata cells in the database; the managers' volume holds no SQLite store`);
}

async function managerState(cluster: Cluster, manager: Container): Promise<string> {
  const { stdout } = await cluster.exec(manager, ['excompact', 'health'], { allowFailure: true });
  try {
    return (JSON.parse(stdout) as { state: string }).state;
  } catch {
    return 'unknown';
  }
}
