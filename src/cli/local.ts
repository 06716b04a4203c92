/**
 * `excompact local`: what `npm start` runs. It starts an embedded ZooKeeper under the data directory and
 * exercises the zk layer against it (instance ACL, layout, a protected ephemeral node watched from a
 * second session and released on close), then keeps ZooKeeper running until Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { ExcError } from '../errors.js';
import { onShutdownSignals } from '../lifecycle.js';
import { pino } from 'pino';
import { createLogger } from '../log.js';
import {
  ZkLayout,
  ZkSession,
  createProtected,
  digestAuthFromSecret,
  ensureLayout,
  freePort,
  startEmbeddedZooKeeper,
  type ZkWatchEvent,
} from '../zk/index.js';
import { action } from './exit.js';

export function registerLocal(program: Command): void {
  program
    .command('local')
    .description('Run a local instance on embedded defaults (what `npm start` runs).')
    .option('--data-dir <dir>', 'where ZooKeeper data, the secret and logs go', './data')
    .option('--zk-port <port>', 'ZooKeeper client port (default: 2181 if free, else any free port)')
    .option('--once', 'stop after the demonstration instead of running until Ctrl-C')
    .addHelpText('after', '\nExamples:\n  npm start\n  excompact local --data-dir /tmp/exc --once\n')
    .action(action(async (opts: { dataDir: string; zkPort?: string; once?: boolean }) => runLocal(opts)));
}

async function runLocal(opts: { dataDir: string; zkPort?: string; once?: boolean }): Promise<void> {
  const config = loadConfig();
  const dataDir = resolve(opts.dataDir);
  mkdirSync(join(dataDir, 'logs'), { recursive: true });
  // The terminal is for people; the JSON log goes to a file.
  const logFile = join(dataDir, 'logs', 'local.log');
  const log = createLogger({
    name: 'local',
    level: config.logLevel,
    destination: pino.destination({ dest: logFile, sync: true }),
  });
  const secret = config.secret ?? localSecret(dataDir);
  const port = opts.zkPort ? Number(opts.zkPort) : await preferredPort(2181);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new ExcError('CONFIG_INVALID', `--zk-port must be a port number, not ${opts.zkPort}`);
  }

  const say = (line: string): void => void process.stdout.write(`${line}\n`);
  say(`excompact local: starting ZooKeeper (data in ${join(dataDir, 'zookeeper')})`);
  const zk = await startEmbeddedZooKeeper({
    dataDir: join(dataDir, 'zookeeper'),
    port,
    tickTimeMs: 500,
    logFile: join(dataDir, 'logs', 'zookeeper.log'),
  });
  say(`  ZooKeeper      ${zk.connectString} (pid ${zk.pid})`);
  say(`  logs           ${logFile}`);

  const auth = digestAuthFromSecret(secret);
  const layout = new ZkLayout(config.zkRoot);
  const options = {
    connectString: zk.connectString,
    sessionTimeoutMs: config.zkSessionTimeoutMs,
    auth,
    logger: log,
  };
  const owner = await ZkSession.connect(options);
  const observer = await ZkSession.connect(options);
  await ensureLayout(owner, layout);
  say(`  session        ${owner.sessionId} (negotiated timeout ${owner.sessionTimeoutMs} ms)`);
  say(`  layout         ${layout.queues}, ${layout.compactors}, ${layout.tservers} (digest ACL)`);

  const demoParent = `${layout.root}/local-demo`;
  await owner.ensurePath(demoParent);
  const { path } = await createProtected(owner, demoParent, 'c-', JSON.stringify({ pid: process.pid }));
  let resolveGone: (event: ZkWatchEvent) => void = () => undefined;
  const gone = new Promise<ZkWatchEvent>((resolve) => (resolveGone = resolve));
  // The watch must be in place before the owner closes, or it would watch for a creation instead.
  await observer.exists(path, (event) => resolveGone(event));
  say(`  ephemeral      ${path}`);
  const closedAt = Date.now();
  await owner.close();
  const event = await gone;
  say(
    `  released       watcher saw '${event.type}' ${Date.now() - closedAt} ms after the owner closed its session`,
  );
  await observer.close();

  const stop = async (): Promise<number> => {
    await zk.stop();
    say('excompact local: stopped');
    return 0;
  };
  if (opts.once) {
    await stop();
    return;
  }
  say(`excompact local: ready. ZooKeeper keeps running at ${zk.connectString}; Ctrl-C stops it.`);
  onShutdownSignals(log, stop);
}

/** The secret of the local instance: generated once and kept in the data directory (mode 0600). */
function localSecret(dataDir: string): string {
  const file = join(dataDir, 'secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const secret = randomBytes(24).toString('base64url');
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

async function preferredPort(port: number): Promise<number> {
  const { createServer } = await import('node:net');
  const free = await new Promise<boolean>((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolveFree(true)));
  });
  return free ? port : freePort();
}
