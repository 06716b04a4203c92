/**
 * The live tablet servers, as their ephemeral nodes under /excompact/tservers say: server address →
 * ZooKeeper session id (the node's ephemeralOwner, the fencing token written into `loc`).
 *
 * One child watch on the parent keeps the set current; a periodic refresh is the backstop for a watch
 * that could not be re-armed. Listeners hear of every change.
 */
import { EventEmitter } from 'node:events';
import { describeError } from '../errors.js';
import { Coalesced } from '../coalesce.js';
import { retry } from '../retry.js';
import type { Logger } from '../log.js';
import type { ZkLayout, ZkSession, ZkWatchEvent } from '../zk/index.js';

interface Events {
  changed: [added: string[], removed: string[]];
}

export class LiveTservers extends EventEmitter<Events> {
  private servers = new Map<string, string>();
  private readonly reads = new Coalesced(
    () => this.readOnce(),
    (err) => this.log.warn({ err: describeError(err) }, 'could not read live tablet servers'),
  );
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly session: ZkSession,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
    private readonly refreshEveryMs = 5_000,
  ) {
    super();
  }

  /**
   * Reads the current set and keeps it current. Resolves only after one read succeeded: a manager that
   * believed no tablet server alive would take every tablet away from every server.
   */
  async start(): Promise<void> {
    await retry(() => this.readOnce(), {
      attempts: Number.POSITIVE_INFINITY,
      baseMs: 100,
      maxMs: 2_000,
      retryOn: () => this.session.isLive,
      onRetry: (err, attempt) =>
        this.log.warn({ err: describeError(err), attempt }, 'could not read live tablet servers yet'),
    });
    this.timer = setInterval(() => void this.refresh(), this.refreshEveryMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    void this.reads.stop();
  }

  /** Session id of a live server, or undefined. */
  sessionOf(server: string): string | undefined {
    return this.servers.get(server);
  }

  isLive(server: string, session: string): boolean {
    return this.servers.get(server) === session;
  }

  get all(): ReadonlyMap<string, string> {
    return this.servers;
  }

  private readonly onChildren = (_event: ZkWatchEvent): void => {
    void this.refresh();
  };

  /** Re-reads the children; concurrent calls coalesce into one more read. */
  refresh(): Promise<void> {
    return this.reads.run();
  }

  private async readOnce(): Promise<void> {
    const children = await this.session.children(this.layout.tservers, this.onChildren);
    const next = new Map<string, string>();
    // Stat every child, even known ones: a server restarted on the same address has a new session.
    const stats = await Promise.all(
      children.map((child) => this.session.exists(this.layout.tserverNode(child))),
    );
    children.forEach((child, i) => {
      const stat = stats[i];
      if (stat) next.set(child, stat.ephemeralOwner);
    });
    const added = [...next.keys()].filter((s) => !this.servers.has(s) || this.servers.get(s) !== next.get(s));
    const removed = [...this.servers.keys()].filter(
      (s) => !next.has(s) || this.servers.get(s) !== next.get(s),
    );
    this.servers = next;
    if (added.length > 0 || removed.length > 0) {
      this.log.info({ added, removed, live: [...next.keys()] }, 'tablet servers changed');
      this.emit('changed', added, removed);
    }
  }
}
