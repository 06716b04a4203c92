/**
 * A live view of the queues for processes that route work (tablet servers): name → id and bins, kept
 * current with a data watch on the queue map. Bins of a queue never change after creation, so they are
 * read once per queue: kept while the same name maps to the same id, dropped when it does not (ids are not
 * reused, but a queue node left by an older version could be given a name again).
 */
import { KeptCurrent } from '../coalesce.js';
import type { Logger } from '../log.js';
import type { ZkLayout, ZkSession, ZkWatchEvent } from '../zk/index.js';
import { readQueueMap, readQueueSettings, type QueueInfo } from './registry.js';

export class QueueResolver {
  private byName = new Map<string, QueueInfo>();
  private readonly view: KeptCurrent;
  private readonly listeners = new Set<(removed: QueueInfo[]) => void>();
  private readonly addedListeners = new Set<(added: QueueInfo[]) => void>();
  private initialized = false;

  constructor(
    private readonly session: ZkSession,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
    refreshEveryMs = 10_000,
  ) {
    this.view = new KeptCurrent({
      what: 'the queues',
      read: () => this.readOnce(),
      everyMs: refreshEveryMs,
      retryWhile: () => session.isLive,
      log,
    });
  }

  /** Reads the queues (retrying until one read succeeds) and keeps them current. */
  start(): Promise<void> {
    return this.view.start();
  }

  stop(): Promise<void> {
    return this.view.stop();
  }

  /** The queue named `name`, if it exists. */
  byQueueName(name: string): QueueInfo | undefined {
    return this.byName.get(name);
  }

  /** Called with the queues that disappeared on each change. */
  onRemoved(listener: (removed: QueueInfo[]) => void): void {
    this.listeners.add(listener);
  }

  /** Called with the queues that appeared on each change (tablets routing to them must queue work). */
  onAdded(listener: (added: QueueInfo[]) => void): void {
    this.addedListeners.add(listener);
  }

  private readonly onMapChanged = (_event: ZkWatchEvent): void => {
    void this.refresh();
  };

  refresh(): Promise<void> {
    return this.view.refresh();
  }

  private async readOnce(): Promise<void> {
    const { map } = await readQueueMap(this.session, this.layout, this.onMapChanged);
    const next = new Map<string, QueueInfo>();
    for (const [name, id] of map) {
      const known = this.byName.get(name);
      const bins =
        known?.id === id ? known.bins : (await readQueueSettings(this.session, this.layout, id)).bins;
      next.set(name, { name, id, bins });
    }
    const removed = [...this.byName.values()].filter((q) => next.get(q.name)?.id !== q.id);
    const added = this.initialized
      ? [...next.values()].filter((q) => this.byName.get(q.name)?.id !== q.id)
      : [];
    this.byName = next;
    this.initialized = true;
    if (removed.length > 0) {
      this.log.info({ removed: removed.map((q) => q.name) }, 'queues removed');
      for (const listener of this.listeners) listener(removed);
    }
    if (added.length > 0) {
      this.log.info({ added: added.map((q) => q.name) }, 'queues added');
      for (const listener of this.addedListeners) listener(added);
    }
  }
}
