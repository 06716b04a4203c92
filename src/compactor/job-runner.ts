/**
 * Running one reserved job: stream the inputs through the merge and iterator stack into the output,
 * report progress to the tablet's host, then commit to the tablet's *current* host.
 *
 * - Progress goes to the tablet server every `progressEveryMs`; RESERVATION_GONE there means the job was
 *   cancelled (the tablet requeued it), so the compaction stops at once.
 * - Commit follows the tablet: on NOT_SERVING or an unreachable server it looks the location up again and
 *   retries with backoff, as long as the reservation is still in the tablet's row (tablet-lookup.ts). It
 *   never commits once the session the job was reserved under is lost: that reservation is being
 *   cancelled.
 * - A progress report the tablet's host does not answer for (NOT_SERVING, unreachable) looks the tablet up
 *   too: a reservation gone from its row (the table deleted, the reservation ended) stops the job at once,
 *   and the abort leaves no output behind (checkpointed parts stay for the collector).
 * - A job that fails (a corrupt input, the object store past its retries) is reported with the error; its
 *   output, if any, is left for the garbage collector.
 * - A job stopped for shutdown is released, so another compactor can take it at once.
 * - A job with at least `checkpoint.bytes` of input, or one resumed, writes its output as checkpointed
 *   parts (storage/parts.ts); each checkpoint rides on the progress reports until one carrying it is
 *   answered, and the tablet server records it in the reservation. A job reserved with a checkpoint goes
 *   on from it. Once committed, the parts are garbage and are deleted here (the collector sweeps whatever
 *   a crash leaves); nothing else ever deletes a part a checkpoint may name.
 */
import { setMaxListeners } from 'node:events';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { statsFields } from '../meta/file-stats.js';
import type { MetaClient } from '../meta/client.js';
import { ALL_ROWS, intersectRows } from '../meta/rows.js';
import type { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';
import {
  compactFiles,
  type CompactFilesArgs,
  type CompactionProgress,
  type CompactionResult,
  type Checkpoint,
  type ObjectStore,
} from '../storage/index.js';
import type { ReservedJob } from '../queue/protocol.js';
import { committedInStore, lookUpTablet } from './tablet-lookup.js';
import type { Links } from './links.js';

/** How long a finished job keeps trying to commit (following its tablet) before it reports a failure. */
const COMMIT_DEADLINE_MS = 60_000;

export type JobOutcome = 'committed' | 'discarded' | 'failed' | 'released' | 'abandoned';

/** Why a running job was stopped from outside. */
export type StopReason = 'session-lost' | 'release' | 'cancelled' | 'queue-deleted';

export interface RunningJob {
  job: ReservedJob;
  server: string;
  startedAt: number;
  progress: CompactionProgress;
  stop(reason: StopReason): void;
}

export interface JobRunnerDeps {
  compactor: string;
  store: ObjectStore;
  meta: MetaClient;
  peers: PeerClients;
  log: Logger;
  progressEveryMs: number;
  /** Whether the session this job was reserved under still holds (checked before each commit attempt). */
  sessionLive: () => boolean;
  /** Links to tablet servers: one to the job's current host while it runs (see links.ts). */
  links: Links;
  /** Runs a compaction: compactFiles in this thread by default, or on a worker thread (compaction-thread.ts). */
  compact?: (args: CompactFilesArgs) => Promise<CompactionResult>;
  /** Checkpoint jobs with at least `bytes` of input, about every `bytes` of output or `ms`. */
  checkpoint?: { bytes: number; ms: number };
  resumes?: { resumed: (bytes: number) => void; checkpointed: () => void };
  /** Merge in native code when the job allows it (compaction.ts; default true). */
  nativeMerge?: boolean;
}

export async function runJob(
  deps: JobRunnerDeps,
  job: ReservedJob,
  server: string,
  onStart: (running: RunningJob) => void,
): Promise<JobOutcome> {
  // The job's current host is linked for as long as the job runs, following the tablet when it moves;
  // the link ends only after the job's last message (commit, release, failure) was answered.
  let linked = server;
  let unlink = deps.links.use(server);
  const follow = (next: string): void => {
    if (next === linked) return;
    const relink = deps.links.use(next);
    unlink();
    unlink = relink;
    linked = next;
  };
  try {
    return await runLinked(deps, job, server, onStart, follow);
  } finally {
    unlink();
  }
}

async function runLinked(
  deps: JobRunnerDeps,
  job: ReservedJob,
  server: string,
  onStart: (running: RunningJob) => void,
  follow: (server: string) => void,
): Promise<JobOutcome> {
  const log = deps.log.child({ ecid: job.ecid, tablet: job.tablet });
  const abort = new AbortController();
  // Every input's reads, the parts' writes and the reports listen to it: more than ten at once is normal.
  setMaxListeners(0, abort.signal);
  let stopReason: StopReason | undefined;
  const running: RunningJob = {
    job,
    server,
    startedAt: Date.now(),
    progress: { entriesRead: 0, entriesWritten: 0, bytesRead: 0, bytesWritten: 0, bytesComposed: 0 },
    stop: (reason) => {
      stopReason ??= reason;
      abort.abort(new ExcError('SHUTTING_DOWN', `job stopped: ${reason}`));
    },
  };
  onStart(running);
  const inputBytes = job.inputs.reduce((s, i) => s + i.size, 0);
  if (job.checkpoint) {
    deps.resumes?.resumed(job.checkpoint.bytes);
    log.info(
      { resumedBytes: job.checkpoint.bytes, parts: job.checkpoint.parts.length },
      'compaction resumed from a checkpoint',
    );
  }
  log.info(
    {
      inputs: job.inputs.length,
      bytes: inputBytes,
      attempt: job.attempt,
      ...(job.range ? { range: job.range } : {}),
      // Whether the merge runs on a worker thread (--concurrency > 1) or on this one.
      thread: deps.compact !== undefined,
    },
    'compaction started',
  );

  const owned = { tablet: job.tablet, ecid: job.ecid, compactor: deps.compactor };
  // Reports go out on a timer, not only when the merge advances: a slow read (a throttled or struggling
  // store) must not delay learning that the reservation was cancelled. The tablet server counts only
  // reports whose figures advanced as progress, so a stuck job is still detected.
  // The latest checkpoint goes with every report until one carrying it was answered.
  let checkpoint: Checkpoint | undefined;
  const sendProgress = (): void => {
    const sent = checkpoint;
    deps.peers
      .get(running.server)
      .post(
        '/v1/progress',
        { ...owned, progress: running.progress, ...(sent ? { checkpoint: sent } : {}) },
        { attempts: 1, timeoutMs: 5_000 },
      )
      .then(() => {
        if (checkpoint === sent) checkpoint = undefined;
      })
      .catch((err: unknown) => {
        if (err instanceof ExcError && err.code === 'RESERVATION_GONE') running.stop('cancelled');
        // The tablet moved (its server died or handed it over): report to its new host from now on.
        // Or its table was deleted, or the reservation ended without this compactor being told: stop.
        else if (err instanceof ExcError && (err.code === 'NOT_SERVING' || err.code === 'UNAVAILABLE')) {
          lookUpTablet(deps.meta, job.tablet, job.ecid).then(
            ({ host, reserved }) => {
              if (!reserved) {
                if (!stopReason) log.info('the reservation is gone from its tablet: stopping');
                running.stop('cancelled');
              } else if (host) {
                running.server = host;
                follow(host);
              }
            },
            () => undefined,
          );
        }
      });
  };
  const ticker = setInterval(sendProgress, deps.progressEveryMs);
  ticker.unref();
  const reportProgress = (p: CompactionProgress): void => {
    running.progress = p;
  };

  // A sub-job of a split (job.range) is never checkpointed: it is a share of a job cut to be small.
  const checkpointing =
    deps.checkpoint && !job.range && (job.checkpoint || inputBytes >= deps.checkpoint.bytes)
      ? {
          everyBytes: deps.checkpoint.bytes,
          everyMs: deps.checkpoint.ms,
          onCheckpoint: (cp: Checkpoint) => {
            checkpoint = cp;
            deps.resumes?.checkpointed();
            log.debug({ bytes: cp.bytes, parts: cp.parts.length }, 'checkpoint taken');
          },
        }
      : undefined;
  let result: CompactionResult;
  try {
    result = await (deps.compact ?? compactFiles)({
      store: deps.store,
      inputs: job.inputs.map((i) => i.name),
      output: job.output,
      settings: job.settings,
      compression: job.compression,
      ...(job.blockSize ? { blockSize: job.blockSize } : {}),
      signal: abort.signal,
      onProgress: reportProgress,
      progressEveryMs: Math.min(1_000, deps.progressEveryMs),
      ...(checkpointing ? { checkpoints: checkpointing } : {}),
      ...(job.checkpoint ? { resume: job.checkpoint } : {}),
      ...readRows(job),
      ...(job.inputs.some((i) => i.fence) ? { fences: job.inputs.map((i) => i.fence ?? null) } : {}),
      nativeMerge: deps.nativeMerge ?? true,
    });
  } catch (err) {
    clearInterval(ticker);
    if (stopReason === 'release') {
      // Best effort, and quick: this runs inside a bounded shutdown. A release that cannot be delivered is
      // done anyway when the session closes or the tablet server sees this compactor's link close.
      await deps.peers
        .get(running.server)
        .post('/v1/release', owned, { attempts: 2, timeoutMs: 2_000 })
        .catch((e: unknown) =>
          log.warn({ err: describeError(e) }, 'release failed; the session close will cancel it'),
        );
      log.info('compaction released');
      return 'released';
    }
    if (stopReason) {
      log.info({ reason: stopReason }, 'compaction abandoned');
      return 'abandoned';
    }
    log.warn({ err: describeError(err) }, 'compaction failed');
    await reportFailure(deps, running, describeError(err), log, follow);
    return 'failed';
  }
  clearInterval(ticker);
  running.progress = result;
  return commit(deps, running, result, log, () => stopReason, follow);
}

async function commit(
  deps: JobRunnerDeps,
  running: RunningJob,
  result: CompactionResult,
  log: Logger,
  stopped: () => StopReason | undefined,
  follow: (server: string) => void,
): Promise<JobOutcome> {
  const { job } = running;
  const out = result.empty ? null : result.output;
  const output = out && { size: out.size, entries: out.entries, ...statsFields(out.stats) };
  const body = { tablet: job.tablet, ecid: job.ecid, compactor: deps.compactor, output };
  const deadline = Date.now() + COMMIT_DEADLINE_MS;
  let unknownOutcome = false;
  let lastError: unknown;
  // The reservation is no longer there. After an attempt whose answer was lost, that may mean the
  // attempt committed: the store says. Otherwise it was cancelled (or its table deleted).
  const gone = async (why: string, fields: Record<string, unknown> = {}): Promise<JobOutcome> => {
    if (unknownOutcome && (await committedInStore(deps.meta, job.tablet, job, output).catch(() => false))) {
      log.info('compaction committed (confirmed from the metadata store after a lost answer)');
      await deleteParts(deps.store, result, log);
      return 'committed';
    }
    log.info(fields, why);
    return 'discarded';
  };
  for (let attempt = 0; Date.now() <= deadline; attempt++) {
    const reason = stopped();
    if (!deps.sessionLive() || (reason && reason !== 'release')) {
      log.info({ reason: reason ?? 'session-lost' }, 'not committing: the reservation is being cancelled');
      return 'abandoned';
    }
    try {
      await deps.peers.get(running.server).post('/v1/commit', body, { attempts: 1, timeoutMs: 30_000 });
      log.info(
        {
          entriesRead: result.entriesRead,
          entriesWritten: result.entriesWritten,
          empty: result.empty,
          size: result.output?.size ?? 0,
          // What this attempt wrote itself: all of it, unless it went on from a checkpoint.
          bytesWritten: result.bytesWritten - result.resumedBytes,
          resumedBytes: result.resumedBytes,
          nativeMerge: result.nativeMerge,
        },
        'compaction committed',
      );
      await deleteParts(deps.store, result, log);
      return 'committed';
    } catch (err) {
      const code = err instanceof ExcError ? err.code : undefined;
      if (code === 'RESERVATION_GONE') {
        return gone('commit rejected: the reservation was cancelled; result discarded', {
          err: (err as ExcError).message,
        });
      }
      if (code === 'BAD_REQUEST') {
        lastError = err;
        break;
      }
      // Anything else may pass: the tablet moved, its server restarted, the manager failed over.
      if (
        code === 'TIMEOUT' ||
        code === 'OUTCOME_UNKNOWN' ||
        (code === 'UNAVAILABLE' && (err as ExcError).details.sent !== false)
      ) {
        unknownOutcome = true;
      }
      lastError = err;
      log.debug({ err: describeError(err), attempt }, 'commit not done yet; trying again');
      await sleep(backoffDelay(attempt, { baseMs: 100, maxMs: 2_000 }));
      const now = await lookUpTablet(deps.meta, job.tablet, job.ecid).catch(() => undefined);
      if (now && !now.reserved)
        return gone('not committing: the reservation is gone from its tablet; result discarded');
      running.server = now?.host ?? running.server;
      follow(running.server);
    }
  }
  // Giving up: end the reservation with the error, rather than leave it to the stall detector.
  log.warn({ err: describeError(lastError) }, 'commit failed');
  await reportFailure(deps, running, `commit failed: ${describeError(lastError)}`, log, follow);
  return 'failed';
}

/** How long a failure report follows its tablet (a host that died, a tablet handed over). */
const FAILURE_REPORT_MS = 20_000;

/**
 * Ends the reservation with the job's error on the tablet's host, following the tablet when its host
 * died or gave it away. A failure that never arrives leaves the reservation to the stall detector, or to
 * the fencing of this whole compactor when its link to that host closes.
 */
async function reportFailure(
  deps: JobRunnerDeps,
  running: RunningJob,
  error: string,
  log: Logger,
  follow: (server: string) => void,
): Promise<void> {
  const { job } = running;
  const body = {
    tablet: job.tablet,
    ecid: job.ecid,
    compactor: deps.compactor,
    error: error.slice(0, 4_000),
  };
  const deadline = Date.now() + FAILURE_REPORT_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await deps.peers.get(running.server).post('/v1/fail', body, { attempts: 2, timeoutMs: 5_000 });
      return;
    } catch (err) {
      const code = err instanceof ExcError ? err.code : undefined;
      // Already ended (cancelled, or the repeat of a report that arrived): nothing left to tell.
      if (code === 'RESERVATION_GONE') return;
      const moved = code === 'NOT_SERVING' || code === 'UNAVAILABLE' || code === 'TIMEOUT';
      if (!moved || Date.now() > deadline) {
        log.warn({ err: describeError(err) }, 'could not report the failure');
        return;
      }
      await sleep(backoffDelay(attempt, { baseMs: 100, maxMs: 2_000 }));
      const now = await lookUpTablet(deps.meta, job.tablet, job.ecid).catch(() => undefined);
      if (now && !now.reserved) return; // ended already: nothing left to tell
      running.server = now?.host ?? running.server;
      follow(running.server);
    }
  }
}

/**
 * After the commit, the parts the output was composed of are garbage: the reservation naming them is gone.
 * Best effort — the collector's sweep deletes what is left.
 */
async function deleteParts(store: ObjectStore, result: CompactionResult, log: Logger): Promise<void> {
  for (const part of result.parts) {
    await store
      .delete(part.name)
      .catch((err: unknown) =>
        log.debug(
          { part: part.name, err: describeError(err) },
          'could not delete a part; the collector will',
        ),
      );
  }
}

/**
 * The rows the compaction reads: a sub-job's range within the rows the job was reserved for (its inputs
 * may hold rows of a tablet they are shared with).
 */
function readRows(job: ReservedJob): Pick<CompactFilesArgs, 'range'> {
  if (!job.range && !job.clip) return {};
  return { range: intersectRows(job.range ?? ALL_ROWS, job.clip ?? ALL_ROWS) };
}
