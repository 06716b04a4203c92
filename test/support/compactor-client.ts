/**
 * A compactor driven step by step by a test: it registers a real ephemeral-sequential node, finds work in
 * the metadata store, reserves it from the tablet server by RPC, runs the compaction with the real storage
 * code and commits, each step on request, so a test can check the metadata between steps and interleave
 * failures. (The real `compactor` process does the same in a loop.)
 */
import { silentLogger } from '../../src/log.js';
import { MetaClient } from '../../src/meta/client.js';
import { parseQueueRow, queuePrefix } from '../../src/meta/keys.js';
import { COL_LOC, locationSchema } from '../../src/meta/tablet.js';
import { resolveQueue, type QueueInfo } from '../../src/queue/registry.js';
import { RpcClient } from '../../src/rpc/client.js';
import {
  compactFiles,
  LocalObjectStore,
  type CompactFilesArgs,
  type CompactionProgress,
  type CompactionResult,
  type ObjectStore,
} from '../../src/storage/index.js';
import type { CommitRequest, ReservedJob } from '../../src/queue/protocol.js';
import { ZkSession, createProtected, digestAuthFromSecret } from '../../src/zk/index.js';
import type { TestCluster } from './cluster.js';
import { startProxy, type TcpProxy } from './proxy.js';

export interface QueueEntryFound {
  row: string;
  tablet: string;
}

export class TestCompactor {
  private constructor(
    readonly cluster: TestCluster,
    readonly session: ZkSession,
    readonly queue: QueueInfo,
    readonly path: string,
    readonly meta: MetaClient,
    readonly store: ObjectStore,
    readonly proxy: TcpProxy | undefined,
  ) {}

  /** Registers a compactor of `queue`; with `viaProxy` its ZooKeeper connection can be cut by the test. */
  static async start(
    cluster: TestCluster,
    queueName: string,
    options: { viaProxy?: boolean; sessionTimeoutMs?: number } = {},
  ): Promise<TestCompactor> {
    const proxy = options.viaProxy ? await startProxy(cluster.zk.port) : undefined;
    const session = await ZkSession.connect({
      connectString: proxy ? proxy.address : cluster.zk.connectString,
      sessionTimeoutMs: options.sessionTimeoutMs ?? cluster.sessionTimeoutMs,
      auth: digestAuthFromSecret(cluster.secret),
    });
    const queue = await resolveQueue(session, cluster.layout, queueName);
    const { path } = await createProtected(
      session,
      cluster.layout.queueNode(queue.id),
      'c-',
      JSON.stringify({ host: 'test', pid: process.pid }),
    );
    const meta = new MetaClient({
      session: await cluster.session(),
      layout: cluster.layout,
      secret: cluster.secret,
      logger: silentLogger(),
    });
    const store = new LocalObjectStore(cluster.storePath);
    return new TestCompactor(cluster, session, queue, path, meta, store, proxy);
  }

  /** The queue entries of this compactor's queue, highest priority first within each bin. */
  async entries(): Promise<QueueEntryFound[]> {
    const out: QueueEntryFound[] = [];
    for await (const cell of this.meta.scanAll({ prefix: queuePrefix(this.queue.id) })) {
      const e = parseQueueRow(cell.row);
      out.push({
        row: cell.row,
        tablet: `${e.tableId}${e.endRow === null ? '<' : `;${e.endRow.toString('hex')}`}`,
      });
    }
    return out;
  }

  /** The server hosting `tablet` now. */
  async locate(tablet: string): Promise<string> {
    const loc = (await this.meta.row(tablet)).get(COL_LOC);
    if (!loc) throw new Error(`tablet ${tablet} is not hosted`);
    return locationSchema.parse(JSON.parse(loc)).server;
  }

  tserver(server: string): RpcClient {
    return new RpcClient({
      baseUrl: `http://${server}`,
      secret: this.cluster.secret,
      timeoutMs: 10_000,
      attempts: 1,
    });
  }

  /** Reserves work on `tablet` (located now); null when the tablet answers NO_WORK. */
  async reserve(tablet: string): Promise<ReservedJob | null> {
    const server = await this.locate(tablet);
    const { job } = await this.tserver(server).post<{ job: ReservedJob | null }>('/v1/reserve', {
      tablet,
      queueId: this.queue.id,
      compactor: this.path,
    });
    return job;
  }

  /**
   * Runs the job's compaction with the real storage code. A test stops it part way with `signal`, from
   * `onProgress` (called for every batch of entries when `progressEveryMs` is 0).
   */
  compact(
    job: ReservedJob,
    options: Pick<CompactFilesArgs, 'signal' | 'onProgress' | 'progressEveryMs'> = {},
  ): Promise<CompactionResult> {
    return compactFiles({
      store: this.store,
      inputs: job.inputs.map((i) => i.name),
      output: job.output,
      settings: job.settings,
      // The table's codec, as the compactor process writes it (job-runner.ts).
      compression: job.compression,
      ...options,
    });
  }

  /** Reports progress to the tablet's current host, as the compactor process does while it works. */
  async progress(job: ReservedJob, progress: CompactionProgress): Promise<void> {
    const server = await this.locate(job.tablet);
    await this.tserver(server).post('/v1/progress', {
      tablet: job.tablet,
      ecid: job.ecid,
      compactor: this.path,
      progress,
    });
  }

  /** Commits to the tablet's current host. */
  async commit(job: ReservedJob, result: CompactionResult): Promise<void> {
    const server = await this.locate(job.tablet);
    const body: CommitRequest = {
      tablet: job.tablet,
      ecid: job.ecid,
      compactor: this.path,
      output:
        result.empty || !result.output ? null : { size: result.output.size, entries: result.output.entries },
    };
    await this.tserver(server).post('/v1/commit', body);
  }

  async fail(job: ReservedJob, error: string): Promise<void> {
    const server = await this.locate(job.tablet);
    await this.tserver(server).post('/v1/fail', {
      tablet: job.tablet,
      ecid: job.ecid,
      compactor: this.path,
      error,
    });
  }

  /** Ends the session cleanly: the node disappears at once. */
  async close(): Promise<void> {
    await this.session.close();
    await this.proxy?.stop();
    await this.store.close();
  }
}
