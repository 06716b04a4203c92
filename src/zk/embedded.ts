/**
 * A real ZooKeeper server (ZooKeeperServerMain) run as a child process: the embedded default of
 * `npm start` and the server every integration test runs against.
 *
 * ZooKeeper logs nothing by default and dies quietly when its port is taken, so start-up is verified: the
 * process must be alive and its `conf` four-letter word must report *our* data directory before the server
 * is handed out. The JVM runs under a small shell guard that kills it when our end of its stdin closes, so
 * a parent that dies, even by SIGKILL, never leaves a ZooKeeper behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, closeSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { ExcError } from '../errors.js';
import { sleep } from '../retry.js';

export const DEFAULT_ZK_JAR = '/usr/share/java/zookeeper.jar';

export interface EmbeddedZooKeeperOptions {
  /** Data directory (created when missing). */
  dataDir: string;
  /** Client port; default a free loopback port. */
  port?: number;
  /** Default 200 ms. Session timeouts are clamped by the server to [2, 20] × tickTime unless set below. */
  tickTimeMs?: number;
  minSessionTimeoutMs?: number;
  maxSessionTimeoutMs?: number;
  /** Default `EXC_ZK_JAR` or /usr/share/java/zookeeper.jar. */
  jar?: string;
  /** File that receives the server's stdout and stderr; default `<dataDir>/zookeeper.log`. */
  logFile?: string;
  /** Default 30 s. */
  startTimeoutMs?: number;
}

export interface EmbeddedZooKeeper {
  readonly connectString: string;
  readonly port: number;
  /** PID of the JVM itself (for SIGSTOP/SIGCONT in tests). */
  readonly pid: number;
  readonly dataDir: string;
  readonly logFile: string;
  /** Sends a four-letter word (`ruok`, `conf`, `cons`, `mntr`, ...) and resolves with the answer. */
  readonly fourLetter: (word: string, timeoutMs?: number) => Promise<string>;
  /** Stops the server (SIGTERM, then SIGKILL after a grace); safe to call twice. */
  readonly stop: () => Promise<void>;
}

/** The ZooKeeper jar to run, or undefined when none is installed. */
export function findZooKeeperJar(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = [env.EXC_ZK_JAR, DEFAULT_ZK_JAR].filter((p): p is string => Boolean(p));
  return candidates.find((p) => existsSync(p));
}

export async function startEmbeddedZooKeeper(options: EmbeddedZooKeeperOptions): Promise<EmbeddedZooKeeper> {
  const jar = options.jar ?? findZooKeeperJar();
  if (!jar) {
    throw new ExcError(
      'SETUP_MISSING',
      `ZooKeeper is not installed: no ${DEFAULT_ZK_JAR}. Install the Debian/Ubuntu package 'zookeeper' (apt-get install zookeeper), set EXC_ZK_JAR to a zookeeper jar, or set EXC_ZK to an existing server`,
    );
  }
  const attempts = options.port ? 1 : 3;
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const port = options.port ?? (await freePort());
    try {
      return await startOnce(jar, port, options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function startOnce(
  jar: string,
  port: number,
  options: EmbeddedZooKeeperOptions,
): Promise<EmbeddedZooKeeper> {
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const tick = options.tickTimeMs ?? 200;
  const cfgPath = join(dataDir, 'zoo.cfg');
  const pidFile = join(dataDir, 'zookeeper.pid');
  const logFile = options.logFile ?? join(dataDir, 'zookeeper.log');
  writeFileSync(
    cfgPath,
    [
      `tickTime=${tick}`,
      `dataDir=${dataDir}`,
      `clientPort=${port}`,
      'clientPortAddress=127.0.0.1',
      `minSessionTimeout=${options.minSessionTimeoutMs ?? 2 * tick}`,
      `maxSessionTimeout=${options.maxSessionTimeoutMs ?? 20 * tick}`,
      'admin.enableServer=false',
      '4lw.commands.whitelist=*',
      'maxClientCnxns=0',
      // Tests create and drop many sessions; keep the transaction log small and purge snapshots.
      'preAllocSize=4096',
      'autopurge.purgeInterval=1',
      '',
    ].join('\n'),
  );
  const jvm = spawnGuardedJava({
    jar,
    mainClass: 'org.apache.zookeeper.server.ZooKeeperServerMain',
    args: [cfgPath],
    pidFile,
    logFile,
  });
  const stop = jvm.stop;
  const fourLetter = (word: string, timeoutMs = 2_000) => fourLetterWord(port, word, timeoutMs);

  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (jvm.hasExited()) {
      throw new ExcError(
        'UNAVAILABLE',
        `ZooKeeper exited during start-up on port ${port}: ${logTail(logFile)}`,
      );
    }
    const conf = await fourLetter('conf', 500).catch(() => '');
    // Verify it is *our* server: another process could own the port.
    if (conf.includes(`clientPort=${port}`) && conf.includes(dataDir)) {
      const pid = jvm.jvmPid();
      return { connectString: `127.0.0.1:${port}`, port, pid, dataDir, logFile, fourLetter, stop };
    }
    await sleep(50);
  }
  await stop();
  throw new ExcError('UNAVAILABLE', `ZooKeeper did not start on port ${port}: ${logTail(logFile)}`);
}

/** JVM options that let several ZooKeepers share a small test machine: a small heap, no optimising JIT. */
export const ZK_JVM_OPTIONS: readonly string[] = [
  '-Xmx256m',
  '-XX:+UseSerialGC',
  '-XX:TieredStopAtLevel=1',
  '-Dzookeeper.admin.enableServer=false',
];

export interface GuardedJavaOptions {
  /** Class path: one jar, or several joined with `:`. */
  jar: string;
  mainClass: string;
  args: readonly string[];
  /** Receives the JVM's own pid (the child process is the guard shell). Emptied at spawn. */
  pidFile: string;
  /** Receives stdout and stderr. Appended to, so a server started again keeps one log. */
  logFile: string;
  /** Default {@link ZK_JVM_OPTIONS}. */
  jvmOptions?: readonly string[];
}

export interface GuardedJava {
  /** The guard shell; it exits with the JVM. */
  readonly child: ChildProcess;
  readonly hasExited: () => boolean;
  /** Resolves once the guard, and so the JVM, has exited. */
  readonly exited: Promise<void>;
  /** PID of the JVM itself, or 0 until the guard has recorded it. */
  readonly jvmPid: () => number;
  /** SIGTERM (with SIGCONT, for a paused JVM), SIGKILL after 3 s; resolves on exit. Safe to call twice. */
  readonly stop: () => Promise<void>;
}

/**
 * Runs `java <jvmOptions> -cp <jar> <mainClass> <args>` under a small shell guard that kills the JVM as
 * soon as our end of the guard's stdin closes: when we stop it, or when this process dies, even by SIGKILL.
 */
export function spawnGuardedJava(options: GuardedJavaOptions): GuardedJava {
  const { pidFile, logFile } = options;
  writeFileSync(pidFile, '');
  const logFd = openSync(logFile, 'a');
  // The guard: start the JVM in the background, record its pid, and kill it as soon as stdin reaches EOF
  // (our end closed: we stopped it, or we died). `wait` makes the guard exit with the JVM. Background jobs
  // of a non-interactive shell get /dev/null as stdin, so the pipe is passed to the watcher as fd 3.
  // Paths are arguments ($1: the pid file, then the command), never part of the script's text.
  const guard = [
    'pidfile=$1',
    'shift',
    'exec 3<&0',
    '"$@" 3<&- </dev/null & pid=$!',
    'echo $pid > "$pidfile"',
    '(cat <&3 >/dev/null; kill -KILL $pid 2>/dev/null) &',
    'exec 3<&-',
    'wait $pid',
  ].join('\n');
  const child = spawn(
    'sh',
    [
      '-c',
      guard,
      'zk-guard',
      pidFile,
      'java',
      ...(options.jvmOptions ?? ZK_JVM_OPTIONS),
      '-cp',
      options.jar,
      options.mainClass,
      ...options.args,
    ],
    { stdio: ['pipe', logFd, logFd] },
  );
  closeSync(logFd);
  let hasExited = false;
  const exited = new Promise<void>((resolveExit) =>
    child.once('exit', () => {
      hasExited = true;
      resolveExit();
    }),
  );
  return {
    child,
    hasExited: () => hasExited,
    exited,
    jvmPid: () => readPid(pidFile),
    stop: makeStop(child, pidFile),
  };
}

function readPid(pidFile: string): number {
  try {
    return Number(readFileSync(pidFile, 'utf8').trim()) || 0;
  } catch {
    return 0;
  }
}

function makeStop(child: ChildProcess, pidFile: string): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      const pid = readPid(pidFile);
      if (pid > 0) {
        signal(pid, 'SIGTERM');
        signal(pid, 'SIGCONT'); // a paused JVM handles SIGTERM only once resumed
      }
      const timer = setTimeout(() => {
        if (pid > 0) signal(pid, 'SIGKILL');
        child.stdin?.destroy();
      }, 3_000);
      await exited;
      clearTimeout(timer);
      child.stdin?.destroy();
    })();
    return stopping;
  };
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** The end of a server's log, for error messages. */
export function logTail(file: string, maxChars = 800): string {
  try {
    const text = readFileSync(file, 'utf8').trim();
    return text.slice(-maxChars) || '(no output)';
  } catch {
    return '(no output)';
  }
}

/** Sends a ZooKeeper four-letter word and resolves with the whole answer. */
export function fourLetterWord(
  port: number,
  word: string,
  timeoutMs: number,
  host = '127.0.0.1',
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const socket = createConnection({ host, port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new ExcError('TIMEOUT', `four-letter word ${word} to ${host}:${port} timed out`));
    }, timeoutMs);
    socket.on('connect', () => socket.end(word));
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolvePromise(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/** A loopback port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePromise(port));
    });
  });
}
