/**
 * A live view of the queues for processes that route work (tablet servers): name → id and bins, kept
 * current with a data watch on the queue map. Bins of a queue never change after creation, so they are
 * read once per id.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ZkLayout, ZkSession, ZkWatchEvent } from '../zk/index.js';
import { readQueueMap, readQueueSettings, type QueueInfo } from './registry.js';

export class QueueResolver {
  private byName = new Map<string, QueueInfo>();
  private readonly bins = new Map<string, number>();
  private refreshing: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly listeners = new Set<(removed: QueueInfo[]) => void>();

  constructor(
    private readonly session: ZkSession,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
  }

  stop(): void {
    this.stopped = true;
  }

  /** The queue named `name`, if it exists. */
  byQueueName(name: string): QueueInfo | undefined {
    return this.byName.get(name);
  }

  byId(id: string): QueueInfo | undefined {
    for (const q of this.byName.values()) if (q.id === id) return q;
    return undefined;
  }

  /** Called with the queues that disappeared on each change. */
  onRemoved(listener: (removed: QueueInfo[]) => void): void {
    this.listeners.add(listener);
  }

  private readonly onMapChanged = (_event: ZkWatchEvent): void => {
    void this.refresh();
  };

  refresh(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.again = false;
        try {
          await this.readOnce();
        } catch (err) {
          this.log.warn({ err: describeError(err) }, 'could not read the queues');
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async readOnce(): Promise<void> {
    const { map } = await readQueueMap(this.session, this.layout, this.onMapChanged);
    const next = new Map<string, QueueInfo>();
    for (const [name, id] of Object.entries(map)) {
      let bins = this.bins.get(id);
      if (bins === undefined) {
        bins = (await readQueueSettings(this.session, this.layout, id)).bins;
        this.bins.set(id, bins);
      }
      next.set(name, { name, id, bins });
    }
    const removed = [...this.byName.values()].filter((q) => next.get(q.name)?.id !== q.id);
    this.byName = next;
    if (removed.length > 0) {
      this.log.info({ removed: removed.map((q) => q.name) }, 'queues removed');
      for (const listener of this.listeners) listener(removed);
    }
  }
}
