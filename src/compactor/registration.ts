/**
 * A compactor's presence in ZooKeeper: one protected EPHEMERAL_SEQUENTIAL node under its queue's node,
 * whose path is the compactor's identity in every reservation.
 *
 * It watches two nodes: the queue's node (deleted: the queue was deleted, the compactor must exit) and its
 * own node (deleted while the session lives: someone removed it, so its reservations are being cancelled
 * and it must register again).
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { Logger } from '../log.js';
import { resolveQueue, type QueueInfo } from '../queue/registry.js';
import { createProtected, type ZkLayout, type ZkSession, type ZkWatchEvent } from '../zk/index.js';

export interface CompactorInfo {
  host: string;
  pid: number;
  version: string;
  started: number;
  /** Where its status endpoint answers. */
  status?: string;
}

interface Events {
  /** The queue's node was deleted. */
  queueDeleted: [];
  /** Our own node was deleted while the session is alive. */
  nodeLost: [];
}

export class Registration extends EventEmitter<Events> {
  private constructor(
    readonly session: ZkSession,
    readonly queue: QueueInfo,
    readonly path: string,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
  ) {
    super();
  }

  /** Resolves the queue (UNKNOWN_QUEUE when it does not exist) and creates the compactor's node. */
  static async register(
    session: ZkSession,
    layout: ZkLayout,
    queueName: string,
    info: Omit<CompactorInfo, 'host' | 'pid' | 'started'> & Partial<CompactorInfo>,
    log: Logger,
  ): Promise<Registration> {
    const queue = await resolveQueue(session, layout, queueName);
    const data: CompactorInfo = { host: hostname(), pid: process.pid, started: Date.now(), ...info };
    const { path } = await createProtected(session, layout.queueNode(queue.id), 'c-', JSON.stringify(data));
    return new Registration(session, queue, path, layout, log);
  }

  /**
   * Starts watching the queue's node and our own. Call once the listeners are attached: if either node is
   * already gone the event fires at once.
   */
  async watch(): Promise<void> {
    const queueNode = this.layout.queueNode(this.queue.id);
    const queueStat = await this.session.exists(queueNode, this.onQueueNode);
    if (!queueStat) {
      this.emit('queueDeleted');
      return;
    }
    if (!(await this.session.exists(this.path, this.onOwnNode))) this.emit('nodeLost');
  }

  private readonly onQueueNode = (event: ZkWatchEvent): void => {
    if (event.type === 'deleted') {
      this.log.warn({ queue: this.queue.name, queueId: this.queue.id }, 'queue node deleted');
      this.emit('queueDeleted');
      return;
    }
    void this.session.exists(event.path, this.onQueueNode).catch(() => undefined);
  };

  private readonly onOwnNode = (event: ZkWatchEvent): void => {
    if (event.type !== 'deleted') {
      void this.session.exists(event.path, this.onOwnNode).catch(() => undefined);
      return;
    }
    // The queue's deletion removes our node first, in the same transaction: tell the two apart. Unable
    // to ask (the connection dropped just then), the node is lost all the same: registering again finds
    // out whether the queue is still there. Saying nothing left the compactor working for tablet servers
    // that had already cancelled its jobs.
    void this.session.exists(this.layout.queueNode(this.queue.id)).then(
      (stat) => this.emit(stat ? 'nodeLost' : 'queueDeleted'),
      () => this.emit('nodeLost'),
    );
  };
}
