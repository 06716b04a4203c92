/**
 * How a compactor finds work and reserves it (DESIGN.md, "The life of a compaction", steps 2 and 3): ask
 * the manager for the next entry of its queue (a long poll), then reserve on the tablet's host.
 */
import { ExcError } from '../errors.js';
import { ulid } from '../ids.js';
import type { MetaClient } from '../meta/client.js';
import type { ReservedJob } from '../queue/protocol.js';
import type { QueueInfo } from '../queue/registry.js';
import type { PeerClients } from '../rpc/peers.js';

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
 * Reserves on the tablet's host: the job, null on a miss (no work left, tablet moved, entry gone), or
 * 'gone' when the tablet server cannot see this compactor's node (its session is being lost).
 *
 * The request carries an id, so it is safe to repeat: when its answer is lost (timeout, connection cut)
 * or its outcome is unknown to the tablet server itself (it reads the tablet back), it is sent again with
 * the same id and returns the reservation it made — none is left behind that this compactor does not know
 * of. `signal` (the session's) stops the repeats: its reservations are being cancelled anyway.
 */
export async function reserve(
  peers: PeerClients,
  server: string,
  request: { tablet: string; queueId: string; compactor: string },
  signal: AbortSignal,
): Promise<ReservedJob | null | 'gone'> {
  const body = { ...request, requestId: ulid() };
  for (let attempt = 1; ; attempt++) {
    try {
      const { job } = await peers
        .get(server)
        .post<{ job: ReservedJob | null }>('/v1/reserve', body, { idempotent: true, attempts: 6, signal });
      return job;
    } catch (err) {
      const code = err instanceof ExcError ? err.code : undefined;
      if (code === 'OUTCOME_UNKNOWN' && attempt < 3 && !signal.aborted) continue;
      if (code === 'OUTCOME_UNKNOWN' || (code !== undefined && MISS.has(code))) return null;
      if (code === 'COMPACTOR_GONE') return 'gone';
      throw err;
    }
  }
}
