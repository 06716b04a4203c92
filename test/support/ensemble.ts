/**
 * A real three-server ZooKeeper ensemble (QuorumPeerMain) on loopback, for tests that need leader
 * elections and for the chaos run. Free of test framework imports.
 *
 *   const zk = await startZooKeeperEnsemble();
 *   const leader = await zk.leader();
 *   await zk.kill(leader);                  // SIGKILL
 *   await zk.waitForQuorum();               // a new leader and its follower serve
 *   await zk.restart(leader);               // 'follower'
 *   await zk.stop();
 *
 * Each member runs under the guard of src/zk/embedded.ts (the JVM dies with this process), logs to its own
 * file (with slf4j-simple, when installed, so elections can be read afterwards), and is verified to be
 * ours (`conf` names our data dir) before it counts towards a quorum.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ExcError } from '../../src/errors.js';
import { sleep } from '../../src/retry.js';
import {
  DEFAULT_ZK_JAR,
  ZK_JVM_OPTIONS,
  findZooKeeperJar,
  fourLetterWord,
  freePort,
  logTail,
  spawnGuardedJava,
  type GuardedJava,
} from '../../src/zk/embedded.js';
import { tempDir } from './tmp.js';

export type EnsembleMemberState = 'running' | 'paused' | 'down';
export type QuorumMode = 'leader' | 'follower';

export interface ZooKeeperEnsembleOptions {
  /** Default 100 ms: session timeouts may then range from 200 ms to 20 s. */
  tickTimeMs?: number;
  /** Parent of the members' data dirs and logs; default a fresh temp dir that stop() removes. */
  dir?: string;
  /** Default `EXC_ZK_JAR` or /usr/share/java/zookeeper.jar. */
  jar?: string;
  /** How long start-up and restart() wait for a serving quorum. Default 60 s. */
  startTimeoutMs?: number;
}

export interface EnsembleMember {
  /** 1, 2 or 3: the server id in `myid`. */
  readonly id: number;
  readonly clientPort: number;
  readonly quorumPort: number;
  readonly electionPort: number;
  /** PID of the member's current JVM; 0 while it is down. Changes on restart. */
  readonly pid: number;
  readonly dataDir: string;
  /** stdout and stderr of every JVM this member ran, appended. */
  readonly logFile: string;
  readonly state: EnsembleMemberState;
}

export interface Quorum {
  leader: number;
  followers: number[];
}

export interface ZooKeeperEnsemble {
  /** All three members, `127.0.0.1:port,...`. */
  readonly connectString: string;
  readonly members: readonly EnsembleMember[];
  /** The id of the member serving as leader of a quorum (polls until one does). */
  leader(timeoutMs?: number): Promise<number>;
  /**
   * Resolves once every running member serves, one as leader and the others as its synced followers, and
   * they are at least two. Rejects at once if a member exited without being told to.
   */
  waitForQuorum(timeoutMs?: number): Promise<Quorum>;
  /** SIGKILL; resolves once the JVM is gone. */
  kill(id: number): Promise<void>;
  /** One member (SIGTERM, SIGKILL after 3 s), or without `id` everything; safe to call twice. */
  stop(id?: number): Promise<void>;
  /** Starts a member again (stopping it first if it runs) and resolves with its mode once it serves. */
  restart(id: number): Promise<QuorumMode>;
  /** SIGSTOP: the member stops answering but keeps its TCP connections open. */
  pause(id: number): void;
  /** SIGCONT. */
  resume(id: number): void;
  fourLetter(id: number, word: string, timeoutMs?: number): Promise<string>;
  /** The end of every member's log, for failure messages. */
  dump(): string;
}

const SIZE = 3;
const START_ATTEMPTS = 3;

/** Starts three members and resolves once they serve as one leader and two followers. */
export async function startZooKeeperEnsemble(
  options: ZooKeeperEnsembleOptions = {},
): Promise<ZooKeeperEnsemble> {
  const jar = options.jar ?? findZooKeeperJar();
  if (!jar) {
    throw new ExcError(
      'SETUP_MISSING',
      `ZooKeeper is not installed: no ${DEFAULT_ZK_JAR}. Install the Debian/Ubuntu package 'zookeeper' or set EXC_ZK_JAR`,
    );
  }
  let lastError: unknown;
  // Free ports are only free a moment ago: a member that cannot bind exits, and the whole ensemble is
  // started again on other ports.
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    const owned = options.dir ? undefined : tempDir('zk-ensemble');
    const dir = resolve(options.dir ?? owned!.path, `attempt-${attempt}`);
    const ensemble = new Ensemble(jar, dir, await allocatePorts(), options, owned?.cleanup);
    try {
      await ensemble.waitForQuorum();
      return ensemble;
    } catch (err) {
      lastError = err;
      await ensemble.stop();
      if (!(err instanceof ExcError && err.details.exited === true)) break;
    }
  }
  throw lastError;
}

interface Ports {
  client: number;
  quorum: number;
  election: number;
}

async function allocatePorts(): Promise<Ports[]> {
  const seen = new Set<number>();
  while (seen.size < SIZE * 3) seen.add(await freePort());
  const ports = [...seen];
  return Array.from({ length: SIZE }, (_, i) => ({
    client: ports[3 * i]!,
    quorum: ports[3 * i + 1]!,
    election: ports[3 * i + 2]!,
  }));
}

class Member implements EnsembleMember {
  readonly clientPort: number;
  readonly quorumPort: number;
  readonly electionPort: number;
  private jvm: GuardedJava | undefined;
  private stateValue: EnsembleMemberState = 'down';
  /** Set when the current JVM exited although nobody stopped it: start-up failed, or it crashed. */
  hasCrashed = false;
  private expectingExit = false;
  /** `conf` of the current JVM named our data dir and port: the port is not someone else's server. */
  private verified = false;

  constructor(
    readonly id: number,
    ports: Ports,
    readonly dataDir: string,
    readonly logFile: string,
    private readonly cfgPath: string,
  ) {
    this.clientPort = ports.client;
    this.quorumPort = ports.quorum;
    this.electionPort = ports.election;
  }

  get pid(): number {
    return this.stateValue === 'down' ? 0 : (this.jvm?.jvmPid() ?? 0);
  }
  get state(): EnsembleMemberState {
    return this.stateValue;
  }

  launch(jar: string): void {
    const jvm = spawnGuardedJava({
      jar: classPath(jar),
      mainClass: 'org.apache.zookeeper.server.quorum.QuorumPeerMain',
      args: [this.cfgPath],
      pidFile: join(this.dataDir, 'zookeeper.pid'),
      logFile: this.logFile,
      jvmOptions: JVM_OPTIONS,
    });
    this.jvm = jvm;
    this.stateValue = 'running';
    this.hasCrashed = false;
    this.expectingExit = false;
    this.verified = false;
    void jvm.exited.then(() => {
      if (this.jvm !== jvm) return;
      this.hasCrashed = !this.expectingExit;
      this.stateValue = 'down';
    });
  }

  async kill(): Promise<void> {
    const jvm = this.jvm;
    if (!jvm || jvm.hasExited()) return;
    this.expectingExit = true;
    const pid = jvm.jvmPid();
    // Before the guard has recorded the pid there is nothing to SIGKILL yet; its stop still ends the JVM.
    if (pid > 0) signal(pid, 'SIGKILL');
    else void jvm.stop();
    await jvm.exited;
  }

  async stop(): Promise<void> {
    if (!this.jvm || this.jvm.hasExited()) return;
    this.expectingExit = true;
    await this.jvm.stop();
  }

  signal(sig: 'SIGSTOP' | 'SIGCONT'): void {
    if (this.stateValue === 'down') throw new Error(`zk member ${this.id} is down`);
    signal(this.pid, sig);
    this.stateValue = sig === 'SIGSTOP' ? 'paused' : 'running';
  }

  fourLetter(word: string, timeoutMs = 2_000): Promise<string> {
    return fourLetterWord(this.clientPort, word, timeoutMs);
  }

  /** Its role, or undefined while it does not serve (looking, starting, not answering). */
  async status(): Promise<{ mode: QuorumMode; syncedFollowers: number } | undefined> {
    const mntr = await this.fourLetter('mntr', 1_000).catch(() => '');
    const fields = new Map(mntr.split('\n').map((line) => line.split('\t') as [string, string]));
    const mode = fields.get('zk_server_state');
    if (mode !== 'leader' && mode !== 'follower') return undefined;
    if (!this.verified) {
      const conf = await this.fourLetter('conf', 1_000).catch(() => '');
      this.verified = conf.includes(`clientPort=${this.clientPort}`) && conf.includes(this.dataDir);
      if (!this.verified) return undefined;
    }
    return { mode, syncedFollowers: Number(fields.get('zk_synced_followers') ?? 0) };
  }
}

class Ensemble implements ZooKeeperEnsemble {
  readonly connectString: string;
  private readonly all: Member[];
  private readonly startTimeoutMs: number;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly jar: string,
    private readonly dir: string,
    ports: Ports[],
    options: ZooKeeperEnsembleOptions,
    private readonly cleanup: (() => void) | undefined,
  ) {
    this.startTimeoutMs = options.startTimeoutMs ?? 60_000;
    const tick = options.tickTimeMs ?? 100;
    rmSync(dir, { recursive: true, force: true });
    this.all = ports.map((p, i) => {
      const id = i + 1;
      const dataDir = join(dir, `zk${id}`);
      mkdirSync(dataDir, { recursive: true });
      writeFileSync(join(dataDir, 'myid'), `${id}\n`);
      const cfgPath = join(dataDir, 'zoo.cfg');
      writeFileSync(cfgPath, config(id, tick, dataDir, ports));
      return new Member(id, p, dataDir, join(dir, `zk${id}.log`), cfgPath);
    });
    this.connectString = this.all.map((m) => `127.0.0.1:${m.clientPort}`).join(',');
    for (const m of this.all) m.launch(jar);
  }

  get members(): readonly EnsembleMember[] {
    return this.all;
  }

  async leader(timeoutMs = this.startTimeoutMs): Promise<number> {
    return this.poll(timeoutMs, 'a leader', async () => {
      const live = this.all.filter((m) => m.state === 'running');
      const statuses = await Promise.all(live.map((m) => m.status()));
      // A leader that has lost its followers still says so until syncLimit passes: demand one follower.
      const i = statuses.findIndex((s) => s?.mode === 'leader' && s.syncedFollowers >= 1);
      return i >= 0 ? live[i]!.id : undefined;
    });
  }

  async waitForQuorum(timeoutMs = this.startTimeoutMs): Promise<Quorum> {
    return this.poll(timeoutMs, 'a quorum of every running member', async () => {
      const live = this.all.filter((m) => m.state === 'running');
      const statuses = await Promise.all(live.map((m) => m.status()));
      const leaders = live.filter((_, i) => statuses[i]?.mode === 'leader');
      const followers = live.filter((_, i) => statuses[i]?.mode === 'follower').map((m) => m.id);
      const leader = leaders[0];
      if (live.length < 2 || leaders.length !== 1 || followers.length !== live.length - 1) return undefined;
      // The leader's count, not the followers' word: a follower that reports 'follower' may still be
      // syncing, and a freshly killed one may still be counted for a moment (hence >=).
      const synced = statuses[live.indexOf(leader!)]!.syncedFollowers;
      return synced >= followers.length ? { leader: leader!.id, followers } : undefined;
    });
  }

  async kill(id: number): Promise<void> {
    await this.member(id).kill();
  }

  async stop(id?: number): Promise<void> {
    if (id !== undefined) return this.member(id).stop();
    this.stopping ??= (async () => {
      // Each stop escalates to SIGKILL by itself and never rejects.
      await Promise.all(this.all.map((m) => m.stop()));
      this.cleanup?.();
    })();
    return this.stopping;
  }

  async restart(id: number): Promise<QuorumMode> {
    if (this.stopping) throw new Error('zk ensemble is stopped');
    const member = this.member(id);
    await member.stop();
    member.launch(this.jar);
    const quorum = await this.waitForQuorum();
    return quorum.leader === id ? 'leader' : 'follower';
  }

  pause(id: number): void {
    this.member(id).signal('SIGSTOP');
  }

  resume(id: number): void {
    this.member(id).signal('SIGCONT');
  }

  fourLetter(id: number, word: string, timeoutMs?: number): Promise<string> {
    return this.member(id).fourLetter(word, timeoutMs);
  }

  dump(): string {
    return this.all
      .map((m) => `--- zk${m.id} (${m.state}, pid ${m.pid}) ${m.logFile}\n${logTail(m.logFile, 3_000)}`)
      .join('\n');
  }

  private member(id: number): Member {
    const member = this.all.find((m) => m.id === id);
    if (!member) throw new Error(`no zk member ${id} (ids are 1 to ${SIZE})`);
    return member;
  }

  private async poll<T>(timeoutMs: number, what: string, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const crashed = this.all.find((m) => m.hasCrashed);
      if (crashed) {
        throw new ExcError(
          'UNAVAILABLE',
          `zk member ${crashed.id} exited by itself (in ${this.dir})\n${logTail(crashed.logFile, 3_000)}`,
          { details: { exited: true, member: crashed.id } },
        );
      }
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) {
        const seen = await Promise.all(
          this.all.map(async (m) => `zk${m.id} ${m.state}: ${(await m.status())?.mode ?? 'not serving'}`),
        );
        throw new ExcError(
          'TIMEOUT',
          `no ${what} within ${timeoutMs} ms (${seen.join(', ')})\n${this.dump()}`,
        );
      }
      await sleep(100);
    }
  }
}

/**
 * Timings, with tick = 100 ms. A SIGKILLed peer's sockets close at once, so election starts at once;
 * cnxTimeout bounds the wait on a peer that accepts a connection but does not answer (a paused one; the
 * default is 5 s). initLimit (ticks) is how long a new leader waits for a quorum of followers to sync, and
 * syncLimit how long a follower or leader tolerates a silent peer: generous enough that a loaded machine's
 * pauses do not cause spurious elections, short enough that a paused leader is replaced in about a second.
 * A taken election port stays taken, so a member retries binding a few times and then exits, which start-up
 * notices and retries on other ports.
 */
function config(id: number, tick: number, dataDir: string, ports: Ports[]): string {
  return [
    `tickTime=${tick}`,
    'initLimit=20',
    'syncLimit=10',
    `dataDir=${dataDir}`,
    `clientPort=${ports[id - 1]!.client}`,
    'clientPortAddress=127.0.0.1',
    ...ports.map((p, i) => `server.${i + 1}=127.0.0.1:${p.quorum}:${p.election}`),
    `minSessionTimeout=${2 * tick}`,
    `maxSessionTimeout=${200 * tick}`,
    'cnxTimeout=1000',
    'electionPortBindRetry=3',
    'admin.enableServer=false',
    '4lw.commands.whitelist=*',
    'maxClientCnxns=0',
    'preAllocSize=4096',
    'autopurge.purgeInterval=1',
    '',
  ].join('\n');
}

/** Three JVMs share a 2-core machine: half the single server's heap. */
const JVM_OPTIONS = [
  ...ZK_JVM_OPTIONS.filter((o) => !o.startsWith('-Xmx')),
  '-Xmx128m',
  '-Dorg.slf4j.simpleLogger.showDateTime=true',
  '-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS',
  // One line per four-letter word would drown the election in our own polling.
  '-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=warn',
];

/** The ZooKeeper jar, plus slf4j-simple when it lies beside it: without a binding ZooKeeper logs nothing. */
function classPath(jar: string): string {
  const simple = join(dirname(jar), 'slf4j-simple.jar');
  return existsSync(simple) ? `${jar}:${simple}` : jar;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}
