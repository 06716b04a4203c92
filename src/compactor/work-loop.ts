/**
 * A compactor's workers (compactor.ts starts `concurrency` of them): each loops — ask the manager for work
 * (a long poll), reserve it from the tablet's host, run it (job-runner.ts), again. Misses (no work left,
 * the tablet moved) back off with jitter; failed jobs make the whole compactor wait (health.ts). A worker follows its compactor's registration: it works under
 * the current one, waits while it registers again, and ends once the compactor stops or its queue is gone.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import type { compactionMetrics, entryMetrics, resumeMetrics } from '../metrics.js';
import type { ReservedJob } from '../queue/protocol.js';
import type { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';
import { DEFAULT_CHECKPOINT_BYTES, DEFAULT_CHECKPOINT_MS } from '../storage/index.js';
import type { ZkSession } from '../zk/index.js';
import { findWork, releaseJob, reserve } from './find-work.js';
import type { Health } from './health.js';
import { runJob, type JobOutcome, type RunningJob } from './job-runner.js';
import type { Links } from './links.js';
import type { CompactorOptions } from './options.js';
import type { Registration } from './registration.js';

/** One registration: a session, its node, and everything reserved under it. */
export interface Generation {
  session: ZkSession;
  registration: Registration;
  meta: MetaClient;
  /** Links to the tablet servers this registration reserves on (closed with it). */
  links: Links;
  /** Aborted when the session is lost: stops waiting and running. */
  abort: AbortController;
}

/** What a worker needs of its compactor. */
export interface WorkerDeps {
  options: CompactorOptions;
  peers: PeerClients;
  log: Logger;
  /** Aborted on shutdown: stops waiting for work. */
  stopTakingWork: AbortSignal;
  /** The registration to work under once ready (replaced on every rejoin; rejects when there is none to be). */
  generationReady: () => Promise<Generation>;
  /** The compactor's current registration. */
  generation: () => Generation | undefined;
  /** The registration is lost: stop everything reserved under it and register again. */
  onLost: (generation: Generation, reason: string) => void;
  /** The jobs running now, by ecid: each worker adds its own while it runs. */
  running: Map<string, RunningJob>;
  /** Jobs ended, by outcome. */
  outcomes: Record<JobOutcome, number>;
  ended: ReturnType<typeof compactionMetrics>;
  entries: ReturnType<typeof entryMetrics>;
  resumes: ReturnType<typeof resumeMetrics>;
  /** The compactor's failure streak (health.ts): shared by its workers. */
  health: Health;
  /** The streak reached its limit: the compactor stops and exits (EXIT_SICK). */
  onSick: (streak: number) => void;
}

/** One worker: find work, reserve, run, commit, again. */
export async function work(slot: number, deps: WorkerDeps): Promise<void> {
  const { options, peers, log, stopTakingWork } = deps;
  let misses = 0;
  while (!stopTakingWork.aborted) {
    let generation: Generation;
    try {
      generation = await deps.generationReady();
    } catch {
      return; // stopping, or the queue is gone
    }
    const signal = AbortSignal.any([generation.abort.signal, stopTakingWork]);
    try {
      const found = await findWork(generation.meta, generation.registration.queue, options, signal);
      if (!found) continue;
      // Linked before reserving: a crash from here on is seen by the tablet server at once.
      const unlink = generation.links.use(found.server);
      const { registration } = generation;
      const reserved = await reserve(
        peers,
        generation.meta,
        found.server,
        { tablet: found.tablet, queueId: registration.queue.id, compactor: registration.path },
        generation.abort.signal,
        // Long enough for a dead host's tablets to be given to another (its session's expiry at most).
        { followMs: 2 * options.zkSessionTimeoutMs + 5_000 },
      ).finally(unlink);
      if (reserved === 'gone') deps.onLost(generation, 'a tablet server reports our node gone');
      const { job, server } = reserved === 'gone' || reserved === null ? { job: null, server: '' } : reserved;
      if (!job) {
        misses++;
        await sleep(backoffDelay(misses, { baseMs: 20, maxMs: 2_000 }), signal).catch(() => undefined);
        continue;
      }
      misses = 0;
      // Reserved just as the shutdown began, or answered after this registration was lost (its jobs were
      // stopped then, and nothing would stop this one): give it back at once rather than run it.
      if (stopTakingWork.aborted || generation.abort.signal.aborted) {
        await release(deps, generation, server, job);
        if (stopTakingWork.aborted) break;
        continue;
      }
      const startedAt = Date.now();
      const outcome = await runJob(
        {
          compactor: generation.registration.path,
          store: options.store,
          meta: generation.meta,
          peers,
          log,
          progressEveryMs: options.progressEveryMs,
          sessionLive: () => deps.generation() === generation && !generation.abort.signal.aborted,
          links: generation.links,
          compact: options.compact,
          checkpoint: {
            bytes: options.checkpointBytes ?? DEFAULT_CHECKPOINT_BYTES,
            ms: options.checkpointMs ?? DEFAULT_CHECKPOINT_MS,
          },
          resumes: deps.resumes,
          nativeMerge: options.nativeMerge ?? true,
        },
        job,
        server,
        (running) => deps.running.set(job.ecid, running),
      ).finally(() => {
        // Its figures move from the running jobs to the ended ones at once: the counters never go back.
        const ran = deps.running.get(job.ecid);
        if (ran) deps.entries.ended(ran.progress);
        deps.running.delete(job.ecid);
      });
      deps.outcomes[outcome]++;
      deps.ended(
        outcome,
        (Date.now() - startedAt) / 1000,
        job.inputs.reduce((n, i) => n + i.size, 0),
      );
      if (outcome === 'committed') deps.health.committed();
      else if (outcome === 'failed') {
        const after = deps.health.failed();
        if (after.exit) {
          deps.onSick(after.streak);
          break;
        }
        log.warn({ slot, streak: after.streak, waitMs: after.waitMs }, 'job failed: waiting before the next');
        await sleep(after.waitMs, stopTakingWork).catch(() => undefined);
      }
    } catch (err) {
      if (signal.aborted) continue;
      misses++;
      log.warn({ slot, err: describeError(err) }, 'finding or reserving work failed');
      await sleep(backoffDelay(misses, { baseMs: 100, maxMs: 5_000 }), stopTakingWork).catch(() => undefined);
    }
  }
}

/** Gives a job back unrun (cancelled as `released`: another compactor can take it at once). */
async function release(
  deps: WorkerDeps,
  generation: Generation,
  server: string,
  job: ReservedJob,
): Promise<void> {
  const lost = generation.abort.signal.aborted;
  deps.log.info(
    { ecid: job.ecid, tablet: job.tablet, compactor: generation.registration.path },
    lost ? 'reserved after the registration was lost: released' : 'reserved while stopping: released',
  );
  await releaseJob(deps.peers, server, job, generation.registration.path);
  deps.outcomes.released++;
  deps.ended('released', 0, 0);
}
