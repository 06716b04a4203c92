/**
 * The metadata client every other process uses: finds the active manager through ZooKeeper (the manager
 * node's data), calls its API, and follows a failover — on NOT_MANAGER or a refused connection it reads
 * the node again (waiting for a new manager if there is none yet) and retries, for up to `failoverMs`.
 *
 * Only calls that were certainly not applied are retried that way; a mutation that timed out is reported
 * as TIMEOUT, because its outcome is unknown and the caller must read back.
 */
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { readManagerAddress } from './discovery.js';
import { notApplied, RpcClient, type CallOptions } from '../rpc/client.js';
import { backoffDelay, sleep } from '../retry.js';
import type { ZkLayout, ZkSession } from '../zk/index.js';
import type { Fence } from './tablet.js';
import type { Cell, Mutation, MutationResult, ScanPage, ScanRequest } from './types.js';

export interface MetaClientOptions {
  secret: string;
  logger: Logger;
  timeoutMs?: number;
  /** How long to keep looking for an active manager before giving up (default 30 s). */
  failoverMs?: number;
  /** ZooKeeper to find the manager; or a fixed `url`. */
  session?: ZkSession;
  layout?: ZkLayout;
  url?: string;
}

export class MetaClient {
  private client: RpcClient | undefined;
  private readonly log: Logger;

  constructor(private readonly options: MetaClientOptions) {
    this.log = options.logger.child({ component: 'meta-client' });
    if (options.url) this.client = this.makeClient(options.url);
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

  async row(row: string): Promise<Map<string, string>> {
    const result = await this.call<{ cols: Record<string, string> }>(
      'POST',
      '/v1/meta/row',
      { row },
      { idempotent: true },
    );
    return new Map(Object.entries(result.cols));
  }

  /**
   * Applies conditional mutations; `fence` names the calling tablet server's session.
   *
   * Calls made in the same turn of the event loop (a tablet server working on many tablets at once) go
   * to the manager as one request: each mutation is still applied or rejected on its own, and each caller
   * gets its own results. Calls with different fences are never combined.
   */
  mutate(mutations: Mutation[], fence?: Fence): Promise<MutationResult[]> {
    return new Promise((resolve, reject) => {
      this.queued.push({ mutations, fence, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.sendQueued());
    });
  }

  private readonly queued: {
    mutations: Mutation[];
    fence?: Fence;
    resolve: (r: MutationResult[]) => void;
    reject: (e: unknown) => void;
  }[] = [];

  private sendQueued(): void {
    const all = this.queued.splice(0);
    const groups = new Map<string, typeof all>();
    let chunk = 0;
    let size = 0;
    for (const q of all) {
      // At most ~1,000 mutations per request (the API takes up to 10,000).
      if (size > 1_000) {
        chunk++;
        size = 0;
      }
      size += q.mutations.length;
      const key = `${chunk}:${q.fence ? `${q.fence.server}/${q.fence.session}` : ''}`;
      groups.set(key, [...(groups.get(key) ?? []), q]);
    }
    for (const group of groups.values()) {
      const mutations = group.flatMap((q) => q.mutations);
      this.call<{ results: MutationResult[] }>(
        'POST',
        '/v1/meta/mutate',
        { mutations, fence: group[0]!.fence },
        { idempotent: false },
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

  /** Any manager API call, following failovers. */
  async call<T>(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<T> {
    const deadline = Date.now() + (this.options.failoverMs ?? 30_000);
    for (let attempt = 0; ; attempt++) {
      const client = await this.resolve(deadline);
      try {
        return await client.call<T>(method, path, body, options);
      } catch (err) {
        if (!(err instanceof ExcError) || !movedAway(err) || Date.now() > deadline) throw err;
        this.log.debug(
          { path, err: err.message, attempt },
          'manager unavailable: looking for the active one',
        );
        if (!this.options.url) this.client = undefined;
        await sleep(backoffDelay(attempt, { baseMs: 50, maxMs: 500 }));
      }
    }
  }

  private async resolve(deadline: number): Promise<RpcClient> {
    if (this.client) return this.client;
    const { session, layout } = this.options;
    if (!session || !layout) throw new ExcError('INTERNAL', 'MetaClient needs a ZooKeeper session or a url');
    for (;;) {
      const address = await readManagerAddress(session, layout);
      if (address) {
        this.client = this.makeClient(`http://${address.host}:${address.port}`);
        return this.client;
      }
      if (Date.now() > deadline) {
        throw new ExcError('UNAVAILABLE', `no active manager registered at ${layout.manager}`, {
          details: { sent: false },
        });
      }
      await sleep(100);
    }
  }

  private makeClient(url: string): RpcClient {
    return new RpcClient({
      baseUrl: url,
      secret: this.options.secret,
      timeoutMs: this.options.timeoutMs,
      logger: this.options.logger,
    });
  }
}

/**
 * The manager we called did not apply the call and cannot take it now: it is not (or no longer) the
 * active one, is stopping, or is out of reach.
 */
function movedAway(err: ExcError): boolean {
  return err.retriable && notApplied(err);
}
