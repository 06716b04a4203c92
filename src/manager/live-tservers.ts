/**
 * The live tablet servers, as their ephemeral nodes under /excompact/tservers say: server address →
 * ZooKeeper session id (the node's ephemeralOwner, the fencing token written into `loc`).
 *
 * One child watch on the parent keeps the set current; a periodic refresh is the backstop for a watch
 * that could not be re-armed. Listeners hear of every change.
 */
import { EventEmitter } from 'node:events';
import { KeptCurrent } from '../coalesce.js';
import type { Logger } from '../log.js';
import { sleep } from '../retry.js';
import type { ZkLayout, ZkSession, ZkWatchEvent } from '../zk/index.js';

interface Events {
  changed: [added: string[], removed: string[]];
}

export class LiveTservers extends EventEmitter<Events> {
  private servers = new Map<string, string>();
  /** Reads started, and the latest started one that succeeded (see readWhenConnected). */
  private readsStarted = 0;
  private lastGoodRead = 0;
  private readonly view: KeptCurrent;

  constructor(
    private readonly session: ZkSession,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
    refreshEveryMs = 5_000,
  ) {
    super();
    this.view = new KeptCurrent({
      what: 'live tablet servers',
      read: () => this.readOnce(),
      everyMs: refreshEveryMs,
      retryWhile: () => session.isLive,
      log,
    });
  }

  /**
   * Reads the current set and keeps it current. Resolves only after one read succeeded: a manager that
   * believed no tablet server alive would take every tablet away from every server.
   */
  start(): Promise<void> {
    return this.view.start();
  }

  stop(): Promise<void> {
    return this.view.stop();
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
    return this.view.refresh();
  }

  /**
   * After a disconnection: resolves true once the session is connected and a read that started after
   * that succeeded (a failed read is tried again), false as soon as `still()` stops holding. Until then
   * the set may miss the watch events of the gap. Rejects when the session is lost or `signal` aborts.
   */
  async readWhenConnected(still: () => boolean, signal: AbortSignal): Promise<boolean> {
    while (still()) {
      await this.session.whenConnected();
      const before = this.readsStarted;
      await this.refresh();
      if (this.lastGoodRead > before && this.session.state === 'connected') return still();
      await sleep(200, signal);
    }
    return false;
  }

  private async readOnce(): Promise<void> {
    const read = ++this.readsStarted;
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
    this.lastGoodRead = Math.max(this.lastGoodRead, read);
    if (added.length > 0 || removed.length > 0) {
      this.log.info({ added, removed, live: [...next.keys()] }, 'tablet servers changed');
      this.emit('changed', added, removed);
    }
  }
}
