/**
 * The Docker side of the compose test: the tools it needs (installed from Debian's packages when missing
 * and we are root), a daemon (the one running, or one it starts and stops), and the compose command in
 * either spelling (`docker compose`, the v2 plugin, or `docker-compose`, Debian's v1).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { ComposeTestError, log, run, say, sleep } from './run.js';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const has = (command: string, args = ['--version']) =>
  spawnSync(command, args, { stdio: 'ignore' }).status === 0;

/**
 * Makes sure docker, a compose and debootstrap are installed. As root, missing ones are installed with
 * apt-get (Debian's docker.io, docker-compose and debootstrap); otherwise UNAVAILABLE says what to install.
 */
export async function ensureTools(): Promise<void> {
  const missing: string[] = [];
  if (!has('docker') || !has('dockerd')) missing.push('docker.io');
  if (!has('docker', ['compose', 'version']) && !has('docker-compose')) missing.push('docker-compose');
  if (!has('debootstrap', ['--version']) && !has('which', ['debootstrap'])) missing.push('debootstrap');
  if (missing.length === 0) return;
  if (!isRoot || !has('apt-get'))
    throw new ComposeTestError(
      'UNAVAILABLE',
      `missing ${missing.join(', ')} and not root with apt-get to install them (apt-get install -y ${missing.join(' ')})`,
    );
  say(`installing ${missing.join(', ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await run('apt-get', ['update', '-qq'], { env, timeoutMs: 300_000 });
  await run('apt-get', ['install', '-y', '-qq', ...missing], { env, timeoutMs: 600_000 });
}

export interface Daemon {
  /** True when the test started this daemon (and so must stop it). */
  started: boolean;
  stop(): Promise<void>;
}

async function daemonAnswers(): Promise<boolean> {
  const info = await run('docker', ['info', '--format', '{{.ServerVersion}}'], {
    allowFailure: true,
    timeoutMs: 15_000,
  }).catch(() => undefined);
  return info?.code === 0;
}

/**
 * The running daemon, or a new one: as root, `dockerd` without a bridge and without touching iptables
 * (every container of the test uses the host network). UNAVAILABLE when there is none and none can start.
 */
export async function ensureDaemon(logPath: string): Promise<Daemon> {
  if (await daemonAnswers()) {
    say('using the running Docker daemon');
    return { started: false, stop: async () => undefined };
  }
  if (!isRoot)
    throw new ComposeTestError('UNAVAILABLE', 'no Docker daemon answers and we are not root to start one');
  if (!has('dockerd'))
    throw new ComposeTestError('UNAVAILABLE', 'no Docker daemon answers and dockerd is not installed');
  const args = [
    '--bridge=none',
    '--iptables=false',
    '--ip6tables=false',
    '--ip-masq=false',
    '--storage-driver=overlay2',
  ];
  say(`starting dockerd ${args.join(' ')} (log: ${logPath})`);
  const out = openSync(logPath, 'a');
  const child: ChildProcess = spawn('dockerd', args, { stdio: ['ignore', out, out] });
  closeSync(out);
  let exited = false;
  child.on('exit', () => (exited = true));
  const deadline = Date.now() + 60_000;
  while (!(await daemonAnswers())) {
    if (exited) throw new ComposeTestError('UNAVAILABLE', `dockerd exited at start (see ${logPath})`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new ComposeTestError('UNAVAILABLE', `dockerd did not answer within 60 s (see ${logPath})`);
    }
    await sleep(300);
  }
  return {
    started: true,
    async stop() {
      if (exited) return;
      say(`stopping the dockerd it started (pid ${child.pid})`);
      const t0 = Date.now();
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      // dockerd stops its containers and the containerd it started before exiting.
      const timeout = sleep(30_000).then(() => 'timeout' as const);
      if ((await Promise.race([gone, timeout])) === 'timeout') {
        log('dockerd did not stop within 30 s: SIGKILL');
        child.kill('SIGKILL');
        await gone;
      }
      say(`dockerd stopped in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    },
  };
}

/** The compose command: `docker compose` when the v2 plugin is there, else `docker-compose`. */
export async function composeCommand(): Promise<[string, ...string[]]> {
  if ((await run('docker', ['compose', 'version'], { allowFailure: true })).code === 0)
    return ['docker', 'compose'];
  if ((await run('docker-compose', ['version'], { allowFailure: true }).catch(() => undefined))?.code === 0)
    return ['docker-compose'];
  throw new ComposeTestError('UNAVAILABLE', 'neither `docker compose` nor `docker-compose` runs');
}
