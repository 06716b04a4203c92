/**
 * The metadata client every other process uses (tablet servers, compactors, the CLI): finds the active
 * manager through ZooKeeper, calls its API, and rides through failovers.
 *
 * It follows the manager node with a watch (discovery.ts). A call that finds no active manager — no node,
 * an answer of NOT_MANAGER or SHUTTING_DOWN (a standby, a manager still taking over, one stopping), a
 * refused connection — was certainly not applied, and is sent again as soon as the node names another
 * manager, or after a short backoff. A call in flight when the node changes is abandoned at once and sent
 * to the new manager. This goes on until `failoverMs` (default 30 s, well above a session timeout) after
 * the trouble began; then the call fails with UNAVAILABLE naming every manager it tried and what each
 * said (the CLI exits 2).
 *
 * A call whose outcome became unknown — sent, then abandoned, timed out or cut off — is sent again only
 * when repeating it is safe:
 *   - idempotent calls (reads, the long poll for work): always (a timeout at most `attempts` times);
 *   - every other call carries a request id (src/manager/requests.ts), with which the manager applies a
 *     change once and answers a repeat as it answered the first;
 *   - raw conditional mutations ({@link MetaClient.mutate}) are never repeated: the caller reads back.
 */
import { ExcError, describeError, isRetriable, toExcError } from '../errors.js';
import { ulid } from '../ids.js';
import type { Logger } from '../log.js';
import { notApplied, RpcClient, type CallOptions } from '../rpc/client.js';
import { backoffDelay } from '../retry.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';
import { fixedManager, ManagerWatch, waitForChange, type ManagerTarget } from './discovery.js';
import { parseInput } from '../validate.js';
import { groupCallers, type Caller } from './mutation-groups.js';
import type { Fence } from './tablet.js';
import {
  MAX_ROWS_PER_READ,
  apiMutationsSchema,
  type Cell,
  type Mutation,
  type MutationResult,
  type ScanPage,
  type ScanRequest,
} from './types.js';

export interface MetaClientOptions {
  secret: string;
  logger: Logger;
  /** Timeout of one call to the manager (default 10 s). */
  timeoutMs?: number;
  /** How long a call keeps trying through a failover, from its first failure (default 30 s). */
  failoverMs?: number;
  /** ZooKeeper to find the manager; or a fixed `url`. */
  session?: ZkSession;
  layout?: ZkLayout;
  url?: string;
  /**
   * Opens a new ZooKeeper session when the one in use is lost: for a client that owns its session (the
   * CLI, an application), which then follows the manager on the new one instead of failing every call
   * from then on. A process whose session is its identity (a tablet server, a compactor) gives none: it
   * builds everything anew on a new session itself.
   */
  reconnect?: () => Promise<ZkSession>;
  /**
   * The largest request body the manager takes (its EXC_RPC_MAX_BODY_BYTES, default 16 MiB): callers'
   * mutations grouped into one request stay under it.
   */
  maxBodyBytes?: number;
}

export interface ManagerCallOptions extends CallOptions {
  /**
   * Send a request id with a call that is not idempotent, which makes it safe to repeat (default true).
   * Only raw mutations go without: the manager does not deduplicate them.
   */
  requestId?: boolean;
}

export const DEFAULT_FAILOVER_MS = 30_000;
/** Backoff between attempts while no manager answers: a new manager serves within milliseconds of its takeover. */
const RETRY = { baseMs: 25, maxMs: 250 };

export class MetaClient {
  private readonly log: Logger;
  private watch: ManagerWatch | undefined;
  private renewing: Promise<void> | undefined;
  private closed = false;
  private readonly fixed: ManagerTarget | undefined;
  private readonly clients = new Map<string, RpcClient>();

  constructor(private readonly options: MetaClientOptions) {
    this.log = options.logger.child({ component: 'meta-client' });
    if (options.url) this.fixed = fixedManager(options.url);
    else if (options.session && options.layout)
      this.watch = new ManagerWatch(options.session, options.layout, this.log);
  }

  scan(request: ScanRequest): Promise<ScanPage> {
    return this.call<ScanPage>('POST', '/v1/meta/scan', request, { idempotent: true });
  }

  /** Every cell matching `request`, following pages. */
  async *scanAll(request: Omit<ScanRequest, 'after'>): AsyncIterable<Cell> {
    let page = await this.scan(request);
    for (;;) {
      yield* page.cells;
      if (!page.next) return;
      page = await this.scan({ ...request, after: page.next });
    }
  }

  /**
   * One row's columns. Calls made in the same turn of the event loop (a tablet server loading many
   * tablets at once) are read with one request of up to 1,000 rows.
   */
  row(row: string): Promise<Map<string, string>> {
    return new Promise((resolve, reject) => {
      this.rowsWanted.push({ row, resolve, reject });
      if (this.rowsWanted.length === 1) setImmediate(() => this.readWanted());
    });
  }

  private readonly rowsWanted: {
    row: string;
    resolve: (cols: Map<string, string>) => void;
    reject: (err: unknown) => void;
  }[] = [];

  private readWanted(): void {
    const wanted = this.rowsWanted.splice(0);
    for (let i = 0; i < wanted.length; i += MAX_ROWS_PER_READ) {
      const group = wanted.slice(i, i + MAX_ROWS_PER_READ);
      const read = this.call<{ rows: Record<string, Record<string, string>> }>(
        'POST',
        '/v1/meta/rows',
        { rows: group.map((w) => w.row) },
        { idempotent: true },
      );
      read.then(
        ({ rows }) => {
          for (const w of group) w.resolve(new Map(Object.entries(rows[w.row] ?? {})));
        },
        (err: unknown) => {
          for (const w of group) w.reject(err);
        },
      );
    }
  }

  /**
   * The rows the manager's mutations changed after `cursor`, but those `server` changed itself; or
   * `reset` when the cursor cannot be followed (src/manager/change-feed.ts).
   */
  changes(
    cursor: { feed: string; seq: number } | undefined,
    server?: string,
  ): Promise<{ feed: string; seq: number; reset: boolean; rows: string[] }> {
    return this.call('POST', '/v1/meta/changes', { cursor, server }, { idempotent: true });
  }

  /**
   * Applies conditional mutations; `fence` names the calling tablet server's session.
   *
   * Calls made in the same turn of the event loop (a tablet server working on many tablets at once) go
   * to the manager as one request: each mutation is still applied or rejected on its own, and each caller
   * gets its own results. Calls with different fences are never combined. Each call's mutations are
   * checked first with the manager's own schema, so an invalid one (BAD_REQUEST, naming it) fails only
   * its caller; and a grouped request stays within the manager's mutation count and body size
   * (mutation-groups.ts), so it is not refused on account of the callers in it.
   *
   * Refused unapplied (no manager, a standby, a stopping one), they are sent again through a failover.
   * Once sent, they are not: a timeout fails with TIMEOUT, and a mutation in flight when the manager
   * changes is abandoned and fails with OUTCOME_UNKNOWN. The caller then reads the rows back (the tablet
   * server does, src/tserver/hosting.ts), and what it reads is final, because of the order of things:
   *   1. The old manager writes only in a transaction that first checks its epoch (store.ts), and its
   *      successor answers no call before its takeover — a write of the new epoch, serialized with those
   *      transactions by SQLite's write lock — has committed. So the abandoned mutation either committed
   *      before the takeover, and every read the successor serves shows it, or it fails its epoch check
   *      whenever the old manager resumes: it can never apply later.
   *   2. The read goes to the successor: this client follows the node, which the old manager never holds
   *      again under its old epoch (it lost its session; a manager that loses its session stops writing at
   *      once and rejoins the election with a new one, whose takeover is a new epoch).
   */
  async mutate(mutations: Mutation[], fence?: Fence): Promise<MutationResult[]> {
    parseInput(apiMutationsSchema, mutations, 'mutations');
    const bytes = Buffer.byteLength(JSON.stringify(mutations));
    return new Promise((resolve, reject) => {
      this.queued.push({ mutations, fence, bytes, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.sendQueued());
    });
  }

  private readonly queued: (Caller & {
    resolve: (r: MutationResult[]) => void;
    reject: (e: unknown) => void;
  })[] = [];

  private sendQueued(): void {
    const groups = groupCallers(this.queued.splice(0), { maxBodyBytes: this.options.maxBodyBytes });
    for (const { callers: group, fence } of groups) {
      const mutations = group.flatMap((q) => q.mutations);
      this.call<{ results: MutationResult[] }>(
        'POST',
        '/v1/meta/mutate',
        { mutations, fence },
        { idempotent: false, requestId: false },
      ).then(
        ({ results }) => {
          let offset = 0;
          for (const q of group) {
            q.resolve(results.slice(offset, offset + q.mutations.length));
            offset += q.mutations.length;
          }
        },
        (err: unknown) => {
          for (const q of group) q.reject(err);
        },
      );
    }
  }

  /** Any manager API call, following failovers (see the module comment). */
  async call<T>(method: string, path: string, body?: unknown, options: ManagerCallOptions = {}): Promise<T> {
    const idempotent = options.idempotent ?? method === 'GET';
    const requestId = !idempotent && options.requestId !== false ? ulid() : undefined;
    const sentPath = requestId ? `${path}${path.includes('?') ? '&' : '?'}requestId=${requestId}` : path;
    const repeatable = idempotent || requestId !== undefined;
    const failover = new Failover(this.options.failoverMs ?? DEFAULT_FAILOVER_MS, `${method} ${path}`);
    let timeouts = 0;
    for (let attempt = 0; ; attempt++) {
      const target = await this.locate(failover, options.signal);
      const call = follow(target.signal, options.signal);
      try {
        return await this.clientFor(target.url).call<T>(method, sentPath, body, {
          ...options,
          idempotent: repeatable,
          attempts: 1,
          signal: call.signal,
        });
      } catch (err) {
        if (options.signal?.aborted) throw err;
        const e = toExcError(err);
        if (e.retriable && notApplied(e)) {
          failover.tried(target.url, describeError(e), false);
          // Not (or no longer) the active manager, or out of reach: look at the node again.
          this.watch?.refresh().catch(() => undefined);
        } else if (target.signal.aborted && e.details.status === undefined) {
          // Abandoned once sent (an answer, with its status, is an answer even if the node changed).
          failover.tried(target.url, 'abandoned in flight: the manager changed', true);
          if (!repeatable) {
            throw new ExcError(
              'OUTCOME_UNKNOWN',
              `${method} ${path}: abandoned in flight when ${target.url} stopped being the active manager; it may or may not have been applied`,
              { cause: err, details: { sent: true, url: target.url } },
            );
          }
        } else if (e.retriable && repeatable && ++timeouts < (options.attempts ?? 4)) {
          failover.tried(target.url, describeError(e), true);
        } else {
          throw err;
        }
        failover.check();
        this.log.debug({ path, attempt, err: describeError(e) }, 'manager call not done: trying again');
        await waitForChange(this.watch, backoffDelay(attempt, RETRY), options.signal);
      } finally {
        call.release();
      }
    }
  }

  /** Stops following the manager node (the session itself belongs to the caller). */
  close(): void {
    this.closed = true;
    this.watch?.close();
  }

  /** Follows the manager on a new session (options.reconnect); concurrent callers share one. */
  private renewSession(lost: ZkSession | undefined): Promise<void> {
    this.renewing ??= (async () => {
      const session = await this.options.reconnect!();
      if (this.closed) return;
      this.watch?.close();
      this.watch = new ManagerWatch(session, this.options.layout!, this.log);
      this.log.info(
        { lost: lost?.sessionId, session: session.sessionId },
        'ZooKeeper session lost: following the manager on a new one',
      );
    })().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  /** The active manager, waiting (until the failover deadline) for one to register. */
  private async locate(failover: Failover, signal?: AbortSignal): Promise<ManagerTarget> {
    if (this.fixed) return this.fixed;
    if (!this.watch) throw new ExcError('INTERNAL', 'MetaClient needs a ZooKeeper session or a url');
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted();
      const watch = this.watch;
      try {
        // Read the node again now and then: the watch is the fast path, not the only one.
        if (attempt > 0 && attempt % 4 === 0) await watch.refresh();
        const target = await watch.current();
        if (target && !target.signal.aborted) return target;
        failover.tried(this.options.layout!.manager, 'no manager registered', false);
      } catch (err) {
        const renew = isZkCode(err, 'ZK_SESSION_LOST') && this.options.reconnect && !this.closed;
        if (!renew && !isRetriable(err)) throw err;
        failover.tried(`ZooKeeper ${this.options.layout!.manager}`, describeError(err), false);
        if (renew) {
          try {
            await this.renewSession(watch.session);
            continue; // at once: a new session may see the manager straight away
          } catch (renewErr) {
            if (!isRetriable(renewErr)) throw renewErr;
            failover.tried('a new ZooKeeper session', describeError(renewErr), false);
          }
        }
      }
      failover.check();
      // Woken by the watch the moment a manager registers.
      await watch.changed(250, signal);
    }
  }

  private clientFor(url: string): RpcClient {
    let client = this.clients.get(url);
    if (!client) {
      client = new RpcClient({
        baseUrl: url,
        secret: this.options.secret,
        timeoutMs: this.options.timeoutMs,
        logger: this.options.logger,
      });
      this.clients.set(url, client);
    }
    return client;
  }
}

/**
 * What one call went through while no manager answered: when the trouble began (its deadline counts from
 * there), where it tried and what it met, for the error it fails with in the end.
 */
class Failover {
  private since: number | undefined;
  private readonly seen = new Map<string, { where: string; what: string; times: number }>();
  /** Whether an attempt may have been applied (sent, no answer): the final error must not say otherwise. */
  private maybeApplied = false;

  constructor(
    private readonly limitMs: number,
    private readonly what: string,
  ) {}

  tried(where: string, what: string, maybeApplied: boolean): void {
    this.since ??= Date.now();
    this.maybeApplied ||= maybeApplied;
    const key = `${where}\n${what.split(':')[0]}`;
    const entry = this.seen.get(key);
    if (entry) {
      entry.times++;
      entry.what = what;
    } else this.seen.set(key, { where, what, times: 1 });
  }

  /** Throws UNAVAILABLE, saying what was tried, once the deadline has passed. */
  check(): void {
    if (this.since === undefined || Date.now() - this.since < this.limitMs) return;
    const tried = [...this.seen.values()].map(
      (t) => `${t.where} (${t.what}${t.times > 1 ? `, ${t.times} times` : ''})`,
    );
    throw new ExcError(
      'UNAVAILABLE',
      `${this.what}: no active manager answered within ${this.limitMs} ms; tried ${tried.join('; ')}`,
      { details: { sent: this.maybeApplied, tried } },
    );
  }
}

/** A signal for one call: aborted when the manager changes or the caller aborts. `release` detaches it. */
function follow(manager: AbortSignal, caller?: AbortSignal): { signal: AbortSignal; release: () => void } {
  // Not AbortSignal.any: its listeners on the long-lived manager signal would pile up, one per call.
  const controller = new AbortController();
  const sources = caller ? [manager, caller] : [manager];
  const onAbort = (): void => {
    const source = sources.find((s) => s.aborted);
    controller.abort(source?.reason);
  };
  for (const s of sources) {
    if (s.aborted) onAbort();
    else s.addEventListener('abort', onAbort, { once: true });
  }
  return {
    signal: controller.signal,
    release: () => {
      for (const s of sources) s.removeEventListener('abort', onAbort);
    },
  };
}
