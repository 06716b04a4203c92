/**
 * A real PostgreSQL server run as a child process, from Debian's `postgresql` package (installed by the
 * project's setup when missing): the database of `npm start -- --postgres` and of the tests that run the
 * metadata store on PostgreSQL.
 *
 * The data directory is made with `initdb` (trust authentication on loopback only, UTF-8, the C locale)
 * unless it holds a cluster already. PostgreSQL refuses to run as root, so when we are root the server runs
 * as the `postgres` user the package creates (setpriv: no fork, so signals reach the server itself). The
 * server listens on loopback only, with no Unix socket. It runs under a small shell guard that stops it
 * when our end of the guard's stdin closes, so a parent that dies, even by SIGKILL, leaves no server
 * behind.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { ExcError } from '../errors.js';
import { sleep } from '../retry.js';
import { freePort, logTail } from '../zk/embedded.js';

export interface EmbeddedPostgresOptions {
  /** Directory for the cluster (`<dir>/data`) and its log (`<dir>/postgres.log`); created when missing. */
  dir: string;
  /** Default a free loopback port. */
  port?: number;
  /**
   * Default true. False turns off fsync and full-page writes: for tests, where a crash of the machine
   * loses nothing anyone needs.
   */
  durable?: boolean;
  /** Default 30 s. */
  startTimeoutMs?: number;
}

export interface EmbeddedPostgres {
  readonly port: number;
  /** postgres://excompact@127.0.0.1:<port>/postgres: the maintenance database. */
  readonly adminUrl: string;
  readonly logFile: string;
  /** The URL of database `name`, created when missing. */
  readonly database: (name: string) => Promise<string>;
  /** Stops the server (fast shutdown, SIGKILL after a grace); safe to call twice. */
  readonly stop: () => Promise<void>;
}

const USER = 'excompact';

/** The directory of PostgreSQL's programs (the newest installed version), or undefined. */
export function findPostgresBin(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.EXC_PG_BIN) return existsSync(join(env.EXC_PG_BIN, 'postgres')) ? env.EXC_PG_BIN : undefined;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const bin = findPostgresBin();
  if (!bin) {
    throw new ExcError(
      'SETUP_MISSING',
      "PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/postgres. Install the Debian/Ubuntu package 'postgresql' (apt-get install postgresql; `node scripts/setup.mjs` does), or set EXC_PG_BIN",
    );
  }
  const owner = serverUser();
  mkdirSync(options.dir, { recursive: true });
  if (owner) {
    chownSync(options.dir, owner.uid, owner.gid);
    const probe = spawnSync(...asServerUser(owner, 'test', ['-x', options.dir]));
    if (probe.status !== 0) {
      throw new ExcError(
        'SETUP_MISSING',
        `PostgreSQL runs as the postgres user, which cannot reach ${options.dir}: make its parent directories searchable by others (chmod o+x) or choose another data directory`,
      );
    }
  }
  const dataDir = join(options.dir, 'data');
  const logFile = join(options.dir, 'postgres.log');
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    const init = spawnSync(
      ...asServerUser(owner, join(bin, 'initdb'), [
        '-D',
        dataDir,
        '-U',
        USER,
        '--auth=trust',
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ]),
      { encoding: 'utf8' },
    );
    if (init.status !== 0) {
      throw new ExcError(
        'SETUP_MISSING',
        `initdb failed: ${(init.stderr || init.stdout || '').trim().slice(-800)}`,
      );
    }
  }
  const port = options.port ?? (await freePort());
  const settings = [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
    ...(options.durable === false
      ? ['-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'synchronous_commit=off']
      : []),
  ];
  const child = guarded(...asServerUser(owner, join(bin, 'postgres'), settings), logFile);
  const adminUrl = `postgres://${USER}@127.0.0.1:${port}/postgres`;
  const stop = stopper(child);
  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new ExcError('SETUP_MISSING', `PostgreSQL exited at start: ${logTail(logFile)}`);
    }
    const client = new pg.Client({ connectionString: adminUrl });
    try {
      await client.connect();
      await client.query('SELECT 1');
      break;
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new ExcError('TIMEOUT', `PostgreSQL did not start on port ${port}: ${logTail(logFile)}`);
      }
      await sleep(100);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  return {
    port,
    adminUrl,
    logFile,
    database: async (name) => {
      if (!/^[a-z][a-z0-9_]{0,62}$/.test(name))
        throw new ExcError('BAD_REQUEST', `bad database name ${name}`);
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (found.rowCount === 0) await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${USER}@127.0.0.1:${port}/${name}`;
    },
    stop,
  };
}

/** The `postgres` user to run the server as, when we are root (PostgreSQL refuses to run as root). */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) =>
    Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || uid <= 0) {
    throw new ExcError(
      'SETUP_MISSING',
      "running as root, and there is no 'postgres' user to run PostgreSQL as",
    );
  }
  return { uid, gid };
}

function asServerUser(
  owner: { uid: number; gid: number } | undefined,
  command: string,
  args: string[],
): [string, string[]] {
  if (!owner) return [command, args];
  return [
    'setpriv',
    [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups', '--', command, ...args],
  ];
}

/** Runs the command under a shell guard that kills it once our end of its stdin closes. */
function guarded(command: string, args: string[], logFile: string): ChildProcess {
  const guard = [
    'exec 3<&0',
    '"$@" 3<&- </dev/null & pid=$!',
    '(cat <&3 >/dev/null; kill -INT $pid 2>/dev/null; sleep 5; kill -KILL $pid 2>/dev/null) &',
    'exec 3<&-',
    "trap 'kill -INT $pid 2>/dev/null' TERM",
    'wait $pid; wait $pid',
  ].join('\n');
  const logFd = openSync(logFile, 'a');
  const child = spawn('sh', ['-c', guard, 'pg-guard', command, ...args], { stdio: ['pipe', logFd, logFd] });
  closeSync(logFd);
  return child;
}

/** SIGTERM to the guard (a fast shutdown of the server), SIGKILL after 10 s; resolves on exit. */
function stopper(child: ChildProcess): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      child.stdin?.destroy();
    })();
    return stopping;
  };
}
