/**
 * The compactor process: `compactor <queue>`. Stateless; operators run any number per queue and kill them
 * at will.
 *
 * States: starting → running ⇄ reconnecting → stopping → stopped.
 *
 * - Registers a protected ephemeral-sequential node under its queue (a clear error when the queue does not
 *   exist) and serves a small authenticated status endpoint.
 * - `concurrency` workers each loop (work-loop.ts): ask the manager for work (a long poll: idle compactors
 *   send one request per `longPollMs` and hear of new work at once), reserve it from the tablet's host,
 *   run it, commit. Misses (no work left, tablet moved) back off with jitter.
 * - Session lost (expiry or the watchdog's verdict): every job stops at once — the tablet servers are
 *   already cancelling their reservations — and the compactor registers again with a new session and
 *   node. A job reserved under the old session is never committed.
 * - Queue deleted: jobs stop and the process exits with {@link EXIT_QUEUE_DELETED} (or the code configured
 *   for it: a pool under a restart policy that restarts failures exits 0 and stays stopped).
 * - Jobs failing one after another: the compactor waits longer after each, reports itself unhealthy, and
 *   after `EXC_COMPACTOR_EXIT_AFTER` in a row stops and exits with {@link EXIT_SICK} (health.ts).
 * - SIGTERM: stop taking work, let running jobs finish for up to `graceMs`, release the rest, close the
 *   session (the node disappears at once), exit 0.
 */
import { EventEmitter } from 'node:events';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { runShutdownSteps, type ShutdownStep } from '../lifecycle.js';
import { MetaClient } from '../meta/client.js';
import {
  compactionMetrics,
  entryMetrics,
  counterOf,
  createRegistry,
  gaugeOf,
  resumeMetrics,
  zkSessionGauge,
} from '../metrics.js';
import { advertisedAddress } from '../net.js';
import { PeerClients } from '../rpc/peers.js';
import { connectZk, listen, ProcessState, serverRpc } from '../process.js';
import type { RpcServer } from '../rpc/server.js';
import { retry, withTimeout } from '../retry.js';
import { ZkLayout } from '../zk/index.js';
import type { JobOutcome, RunningJob } from './job-runner.js';
import { Links } from './links.js';
import { Registration } from './registration.js';
import { EXIT_QUEUE_DELETED, EXIT_SICK } from './exit-codes.js';
import { DEFAULT_HEALTH, Health } from './health.js';
import { COMPACTOR_LIFECYCLE, type CompactorOptions, type CompactorState } from './options.js';
import { work, type Generation, type WorkerDeps } from './work-loop.js';
export const COMPACTOR_VERSION = '0.1.0';

export { COMPACTOR_LIFECYCLE, type CompactorOptions, type CompactorState } from './options.js';

interface Events {
  state: [CompactorState | 'stopping' | 'stopped'];
  /** The process should exit with this code (queue deleted). */
  exit: [code: number, reason: string];
}

export class Compactor extends EventEmitter<Events> {
  private readonly log: Logger;
  private readonly stateCell: ProcessState<CompactorState>;
  private readonly server: RpcServer;
  private readonly layout: ZkLayout;
  private readonly peers: PeerClients;
  private generation: Generation | undefined;
  private generationReady: Promise<Generation> | undefined;
  private readonly running = new Map<string, RunningJob>();
  private readonly workers: Promise<void>[] = [];
  /** Aborted on shutdown: stops waiting for work. */
  private readonly stopTakingWork = new AbortController();
  private readonly outcomes: Record<JobOutcome, number> = {
    committed: 0,
    discarded: 0,
    failed: 0,
    released: 0,
    abandoned: 0,
  };
  private statusUrl: string | undefined;
  private readonly registry = createRegistry('compactor');
  private readonly ended: ReturnType<typeof compactionMetrics>;
  private readonly entries: ReturnType<typeof entryMetrics>;
  private readonly resumes: ReturnType<typeof resumeMetrics>;
  private readonly health: Health;

  constructor(private readonly options: CompactorOptions) {
    super();
    this.log = options.logger.child({ component: 'compactor', queue: options.queue });
    this.stateCell = new ProcessState({
      initial: 'connecting',
      lifecycle: COMPACTOR_LIFECYCLE,
      log: this.log,
      what: 'compactor',
      registry: this.registry,
      onChange: (s) => this.emit('state', s),
    });
    this.layout = new ZkLayout(options.zkRoot);
    this.peers = new PeerClients({
      secret: options.secret,
      timeoutMs: options.rpcTimeoutMs,
      logger: options.logger,
    });
    this.health = new Health({
      backoffMs: options.compactorBackoffMs ?? DEFAULT_HEALTH.backoffMs,
      backoffMaxMs: options.compactorBackoffMaxMs ?? DEFAULT_HEALTH.backoffMaxMs,
      sickAfter: options.compactorSickAfter ?? DEFAULT_HEALTH.sickAfter,
      exitAfter: options.compactorExitAfter ?? DEFAULT_HEALTH.exitAfter,
    });
    this.server = serverRpc(
      options,
      () => ({
        ok: (this.state === 'serving' || this.state === 'suspended') && this.health.healthy,
        state: this.state,
        healthy: this.health.healthy,
        failureStreak: this.health.streak,
      }),
      this.registry,
    );
    gaugeOf(
      this.registry,
      'excompact_compactor_healthy',
      'Whether the compactor counts itself healthy (0: EXC_COMPACTOR_SICK_AFTER failed jobs in a row)',
      () => (this.health.healthy ? 1 : 0),
    );
    gaugeOf(
      this.registry,
      'excompact_compactor_failure_streak',
      'Failed jobs in a row (0 after a commit)',
      () => this.health.streak,
    );
    counterOf(
      this.registry,
      'excompact_compactor_jobs_total',
      'Jobs by outcome: committed, discarded, failed, released, abandoned',
      () => ({ ...this.outcomes }),
      'outcome',
    );
    gaugeOf(this.registry, 'excompact_compactor_running_jobs', 'Jobs running now', () => this.running.size);
    zkSessionGauge(this.registry, () => this.generation?.session);
    this.ended = compactionMetrics(this.registry, options.queue);
    this.entries = entryMetrics(this.registry, options.queue, () => this.running.values());
    this.resumes = resumeMetrics(this.registry, options.queue);
    this.server.route('GET', '/status', {}, () => this.status());
  }

  get state(): CompactorState | 'stopping' | 'stopped' {
    return this.stateCell.value;
  }

  /** The compactor's identity (its node path) in the current registration. */
  get path(): string | undefined {
    return this.generation?.registration.path;
  }

  async start(): Promise<void> {
    const bound = await listen(this.server, this.options);
    const { host, port } = advertisedAddress(this.options, bound);
    this.statusUrl = `http://${host}:${port}`;
    this.generationReady = this.connect();
    const first = await this.generationReady;
    if (this.state !== 'connecting') return; // stopped meanwhile (SIGTERM, or the queue was deleted)
    this.stateCell.set('serving', 'registered');
    this.log.info(
      { compactor: first.registration.path, queueId: first.registration.queue.id, status: this.statusUrl },
      'compactor ready',
    );
    const deps = this.workerDeps();
    for (let i = 0; i < this.options.concurrency; i++) this.workers.push(work(i, deps));
  }

  /**
   * A new session and node. Throws UNKNOWN_QUEUE when the queue does not exist, ZK_SESSION_LOST when the
   * session or the node is lost before the registration is complete.
   *
   * The generation is adopted (`this.generation`) only once its watches are set. Before that a loss only
   * fails this attempt, and whoever called connect tries again: reported to {@link onLost} as well, it would
   * start a second rejoin beside the caller's retry, both would register, and the compactor could end up
   * adopting a registration no worker uses (found by review: it never committed again).
   */
  private async connect(): Promise<Generation> {
    const session = await connectZk(this.options);
    try {
      const registration = await Registration.register(
        session,
        this.layout,
        this.options.queue,
        { version: COMPACTOR_VERSION, ...(this.statusUrl ? { status: this.statusUrl } : {}) },
        this.log,
      );
      const meta = new MetaClient({
        session,
        layout: this.layout,
        secret: this.options.secret,
        logger: this.options.logger,
        timeoutMs: this.options.rpcTimeoutMs,
        failoverMs: this.options.managerFailoverMs,
      });
      const generation: Generation = {
        session,
        registration,
        meta,
        links: new Links(this.peers, registration.path, this.log),
        abort: new AbortController(),
      };
      let lostEarly: string | undefined;
      const lost = (reason: string): void => {
        if (this.generation === generation) this.onLost(generation, reason);
        else lostEarly ??= reason;
      };
      session.once('lost', (reason) => lost(`zookeeper session lost (${reason})`));
      // A disconnection within the session timeout changes nothing: jobs run on, reservations stand.
      session.on('suspended', () => {
        if (this.generation === generation && this.state === 'serving')
          this.stateCell.set('suspended', 'zookeeper connection lost');
      });
      session.on('reconnected', () => {
        if (this.generation === generation && this.state === 'suspended')
          this.stateCell.set('serving', 'zookeeper connection back');
      });
      registration.once('nodeLost', () => lost('compactor node deleted'));
      registration.once('queueDeleted', () => this.onQueueDeleted());
      await registration.watch();
      if (lostEarly !== undefined || !session.isLive) {
        throw new ExcError(
          'ZK_SESSION_LOST',
          `registration ${registration.path} lost while registering: ${lostEarly ?? 'session ended'}`,
        );
      }
      this.generation = generation;
      this.log.info({ compactor: registration.path, session: session.sessionId }, 'compactor registered');
      return generation;
    } catch (err) {
      await session.close();
      throw err;
    }
  }

  /** The session (or our node) is gone: stop everything reserved under it and register again. */
  private onLost(generation: Generation, reason: string): void {
    if (this.generation !== generation || this.stateCell.ending) return;
    this.log.warn(
      { reason, compactor: generation.registration.path },
      'registration lost: stopping its jobs and registering again',
    );
    generation.abort.abort(new ExcError('ZK_SESSION_LOST', reason));
    for (const job of this.running.values()) job.stop('session-lost');
    generation.links.close();
    this.generation = undefined;
    this.stateCell.set('expired', reason);
    this.stateCell.set('rejoining', 'registering again with a new session');
    void generation.session.close();
    // Registering again waits out ZooKeeper being unreachable for as long as it takes, but not a shutdown:
    // the signal ends the wait between attempts at once.
    this.generationReady = retry(
      async () => {
        const next = await this.connect();
        this.stateCell.set('serving', 'registered again');
        return next;
      },
      {
        attempts: Infinity,
        baseMs: 200,
        maxMs: 5_000,
        signal: this.stopTakingWork.signal,
        retryOn: (err) => !(err instanceof ExcError && err.code === 'UNKNOWN_QUEUE'),
        onRetry: (err, attempt) =>
          this.log.warn({ err: describeError(err), attempt }, 'could not register again; retrying'),
      },
    ).catch((err: unknown) => {
      if (err instanceof ExcError && err.code === 'UNKNOWN_QUEUE') this.onQueueDeleted();
      throw err;
    });
    this.generationReady.catch(() => undefined);
  }

  private onQueueDeleted(): void {
    if (this.stateCell.ending) return;
    const reason = `queue ${this.options.queue} was deleted`;
    this.log.warn({ queue: this.options.queue }, `${reason}: stopping`);
    for (const job of this.running.values()) job.stop('queue-deleted');
    const code = this.options.queueGoneExitCode ?? EXIT_QUEUE_DELETED;
    void this.close({ release: false }).then(() => this.emit('exit', code, reason));
  }

  /** What the workers (work-loop.ts) read and update of this compactor. */
  private workerDeps(): WorkerDeps {
    return {
      options: this.options,
      peers: this.peers,
      log: this.log,
      stopTakingWork: this.stopTakingWork.signal,
      generationReady: () => this.generationReady!,
      generation: () => this.generation,
      onLost: (generation, reason) => this.onLost(generation, reason),
      running: this.running,
      outcomes: this.outcomes,
      ended: this.ended,
      entries: this.entries,
      resumes: this.resumes,
      health: this.health,
      onSick: (streak) => this.onSick(streak),
    };
  }

  /** Its jobs keep failing: stop and exit with EXIT_SICK, for its orchestrator to replace it (health.ts). */
  private onSick(streak: number): void {
    if (this.stateCell.ending) return;
    const reason = `${streak} jobs failed in a row`;
    this.log.error({ streak }, `${reason}: this compactor is sick, stopping`);
    void this.close().then(() => this.emit('exit', EXIT_SICK, reason));
  }

  private status(): Record<string, unknown> {
    return {
      state: this.state,
      queue: this.options.queue,
      compactor: this.path ?? null,
      session: this.generation?.session.sessionId ?? null,
      concurrency: this.options.concurrency,
      healthy: this.health.healthy,
      failureStreak: this.health.streak,
      outcomes: this.outcomes,
      jobs: [...this.running.values()].map((r) => ({
        ecid: r.job.ecid,
        tablet: r.job.tablet,
        server: r.server,
        kind: r.job.kind,
        inputs: r.job.inputs.length,
        startedAt: r.startedAt,
        progress: r.progress,
      })),
    };
  }

  /**
   * Stops: no new work; running jobs get `graceMs` to finish, then are released (or just abandoned when
   * `release` is false); the session is closed so the node disappears at once. Safe to call twice.
   */
  close(options: { release?: boolean } = {}): Promise<void> {
    return this.stateCell.stopOnce(async () => {
      this.stopTakingWork.abort(new ExcError('SHUTTING_DOWN', 'compactor is stopping'));
      const jobs = Promise.allSettled(this.workers);
      if (this.running.size > 0 && this.options.graceMs > 0) {
        await withTimeout(jobs, this.options.graceMs).catch(() => undefined);
      }
      for (const job of this.running.values())
        job.stop(options.release === false ? 'queue-deleted' : 'release');
      await withTimeout(jobs, 4_500).catch(() =>
        this.log.warn({ jobs: this.running.size }, 'jobs did not stop in time: leaving them to be reclaimed'),
      );
      const steps: ShutdownStep[] = [
        ['tablet server links', () => this.generation?.links.close()],
        ['zookeeper session', () => this.generation?.session.close()],
        ['status server', () => this.server.close(200)],
        ['object store', () => this.options.store.close()],
      ];
      await runShutdownSteps(this.log, steps);
    });
  }
}
