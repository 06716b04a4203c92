/**
 * How a compactor finds work and reserves it (DESIGN.md, "The life of a compaction", steps 2 and 3): ask
 * the manager for the next entry of its queue (a long poll), then reserve on the tablet's host.
 */
import { ExcError } from '../errors.js';
import { ulid } from '../ids.js';
import type { MetaClient } from '../meta/client.js';
import { parseTablet } from '../meta/tablet.js';
import type { ReservedJob } from '../queue/protocol.js';
import type { QueueInfo } from '../queue/registry.js';
import { notApplied } from '../rpc/client.js';
import type { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';

/** Answers after which the entry is treated as a miss: the work moved, went, or is being changed. */
const MISS: ReadonlySet<string> = new Set([
  'NOT_SERVING',
  'CONFLICT',
  'UNAVAILABLE',
  'UNKNOWN_TABLE',
  'TIMEOUT',
]);

/** Asks the manager for the next entry of `queue`, waiting up to `longPollMs` for one. */
export async function findWork(
  meta: MetaClient,
  queue: QueueInfo,
  options: { longPollMs: number; rpcTimeoutMs: number },
  signal: AbortSignal,
): Promise<{ tablet: string; server: string } | undefined> {
  const { work } = await meta.call<{ work: { tablet: string; location: { server: string } } | null }>(
    'POST',
    '/v1/queues/next',
    {
      queueId: queue.id,
      bins: queue.bins,
      startBin: Math.floor(Math.random() * queue.bins),
      waitMs: options.longPollMs,
    },
    { idempotent: true, timeoutMs: options.longPollMs + options.rpcTimeoutMs, signal },
  );
  return work ? { tablet: work.tablet, server: work.location.server } : undefined;
}

/**
 * Reserves on the tablet's host: the job and the host that holds it, null on a miss (no work left, tablet
 * moved, entry gone), or 'gone' when the tablet server cannot see this compactor's node (its session is
 * being lost).
 *
 * The request carries an id, so it is safe to repeat: sent again with the same id, it returns the
 * reservation it made. When an attempt may have been applied without this compactor hearing the answer
 * (a timeout, a connection cut, the tablet server's own unknown outcome) and the host then fails or gives
 * the tablet away, the request follows the tablet: it is repeated wherever the metadata store says the
 * tablet is hosted now, for up to `followMs`. A host that died right after writing the reservation leaves
 * it to its heir, and the heir answers the repeat with it: none is left behind that this compactor does
 * not know of (it would hold the job until this compactor's link or session ended, or the stall timeout).
 * A request certainly never applied (refused, or never sent) is a miss at once. `signal` (the session's)
 * stops the repeats: its reservations are being cancelled anyway.
 */
export async function reserve(
  peers: PeerClients,
  meta: Pick<MetaClient, 'row'>,
  server: string,
  request: { tablet: string; queueId: string; compactor: string },
  signal: AbortSignal,
  options: { followMs: number },
): Promise<{ job: ReservedJob; server: string } | null | 'gone'> {
  const body = { ...request, requestId: ulid() };
  const deadline = Date.now() + options.followMs;
  let host = server;
  let maybeApplied = false;
  for (let attempt = 1; ; attempt++) {
    try {
      const { job } = await peers
        .get(host)
        .post<{ job: ReservedJob | null }>('/v1/reserve', body, { idempotent: true, attempts: 1, signal });
      return job ? { job, server: host } : null;
    } catch (err) {
      const code = err instanceof ExcError ? err.code : undefined;
      if (code === 'COMPACTOR_GONE') return 'gone';
      if (code === undefined || !FOLLOW.has(code)) {
        if (code !== undefined && MISS.has(code)) return null;
        throw err;
      }
      if (!notApplied(err) && code !== 'NOT_SERVING') maybeApplied = true;
      if (signal.aborted) return null;
      // Never applied anywhere: a host that is down or starting gets a few quick repeats, then it is a miss.
      if (!maybeApplied && (code !== 'UNAVAILABLE' || attempt >= QUICK_ATTEMPTS)) return null;
      if (maybeApplied && Date.now() > deadline) return null;
      await sleep(backoffDelay(attempt, { baseMs: 50, maxMs: 1_000 }), signal).catch(() => undefined);
      if (maybeApplied) host = (await hostOf(meta, request.tablet).catch(() => undefined)) ?? host;
    }
  }
}

/** Gives a reserved job back unrun, best effort: if this fails, the link or the session ending cancels it. */
export async function releaseJob(
  peers: PeerClients,
  server: string,
  job: Pick<ReservedJob, 'tablet' | 'ecid'>,
  compactor: string,
): Promise<void> {
  await peers
    .get(server)
    .post('/v1/release', { tablet: job.tablet, ecid: job.ecid, compactor }, { attempts: 2 })
    .catch(() => undefined);
}

/** Answers after which a request that may have been applied is repeated, on the tablet's current host. */
const FOLLOW: ReadonlySet<string> = new Set(['UNAVAILABLE', 'TIMEOUT', 'OUTCOME_UNKNOWN', 'NOT_SERVING']);

/** Repeats of a request that was certainly not applied, to a host that is down or starting. */
const QUICK_ATTEMPTS = 6;

async function hostOf(meta: Pick<MetaClient, 'row'>, tablet: string): Promise<string | undefined> {
  return parseTablet(tablet, await meta.row(tablet)).loc?.server;
}
