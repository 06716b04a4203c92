/**
 * Finding work for compactors (DESIGN.md, "The life of a compaction", step 2), served by the manager so
 * that an idle compactor neither polls the metadata store in a loop nor waits long for new work.
 *
 * `next(queue, startBin, bins, waitMs)` scans the queue's bins starting at `startBin` (the compactor picks
 * it at random, so load spreads over bins) and returns the first entry — the highest priority of that
 * bin — whose tablet is hosted, with the tablet's location. When there is none it waits, up to `waitMs`
 * (a long poll): the group commit reports every batch that writes `~cq` rows, and each new entry of a
 * queue wakes one waiting compactor of that queue, which scans again. An idle compactor therefore sends
 * one request per `waitMs` and learns of new work within a round trip.
 */
import type { MetaBackend } from '../meta/backend.js';
import { parseQueueRow, queueEntryTablet, queuePrefix, QUEUE_ID_RE } from '../meta/keys.js';
import { COL_LOC, QUEUED_PREFIX, locationSchema, type Location } from '../meta/tablet.js';
import { entryQueuedAt } from '../queue/entries.js';
import type { CommitQueue } from './commit-queue.js';

export interface FoundWork {
  /** The `~cq` row. */
  entry: string;
  /** When the entry was queued, if it says (for excompact_pickup_seconds; not sent to compactors). */
  queuedAt?: number;
  tablet: string;
  priority: number;
  location: Location;
}

const MAX_ENTRIES_PER_BIN = 32;

interface Waiter {
  wake: () => void;
}

export class WorkFinder {
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** For /status and the benchmark. */
  readonly stats = { requests: 0, found: 0, waits: 0, wakeups: 0 };

  constructor(
    private readonly store: MetaBackend,
    commits: CommitQueue,
  ) {
    commits.onApplied(({ written, hosted }) => {
      this.onWritten(written);
      void this.onHosted(hosted).catch(() => undefined); // a missed wake-up: the waiter's timeout covers it
    });
  }

  async next(
    queueId: string,
    startBin: number,
    bins: number,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<FoundWork | null> {
    this.stats.requests++;
    const found = await this.scan(queueId, startBin, bins);
    if (found || waitMs <= 0) {
      if (found) this.stats.found++;
      return found;
    }
    this.stats.waits++;
    await this.wait(queueId, waitMs, signal);
    const after = await this.scan(queueId, startBin, bins);
    if (after) this.stats.found++;
    return after;
  }

  /** Number of compactors waiting on each queue (for status). */
  waiting(): Record<string, number> {
    return Object.fromEntries([...this.waiters].map(([q, w]) => [q, w.size]));
  }

  private async scan(queueId: string, startBin: number, bins: number): Promise<FoundWork | null> {
    // An idle queue is the common case: one query says so, instead of one per bin.
    if (bins > 1 && (await this.store.scan({ prefix: queuePrefix(queueId), limit: 1 })).cells.length === 0)
      return null;
    for (let i = 0; i < bins; i++) {
      const bin = (startBin + i) % bins;
      // Skip entries whose tablet is not hosted right now (its next host rewrites them when it loads it),
      // but look at only the first few of a bin: after a tablet server dies a bin can hold many such
      // entries, and a request must stay cheap. Other bins, and the next request, get their turn.
      const { cells } = await this.store.scan({
        prefix: queuePrefix(queueId, bin),
        limit: MAX_ENTRIES_PER_BIN,
      });
      // The first entry's tablet is almost always hosted: its location alone, then (when it is not) the
      // others' together — one round trip's wait either way, on a store across the network.
      const entries = cells.map((cell) => ({ cell, entry: parseQueueRow(cell.row) }));
      const locationOf = ({ entry }: (typeof entries)[number]) =>
        this.store.get(queueEntryTablet(entry), COL_LOC);
      const first = entries.length > 0 ? await locationOf(entries[0]!) : undefined;
      const locations = first ? [first] : [first, ...(await Promise.all(entries.slice(1).map(locationOf)))];
      for (const [i, { cell, entry }] of entries.entries()) {
        const tablet = queueEntryTablet(entry);
        const loc = locations[i];
        if (!loc) continue;
        return {
          entry: cell.row,
          tablet,
          priority: entry.priority,
          location: locationSchema.parse(JSON.parse(loc)),
          queuedAt: entryQueuedAt(cell.value),
        };
      }
    }
    return null;
  }

  private wait(queueId: string, waitMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(queueId);
      if (!set) {
        set = new Set();
        this.waiters.set(queueId, set);
      }
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', waiter.wake);
          set.delete(waiter);
          if (set.size === 0) this.waiters.delete(queueId);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, waitMs);
      signal.addEventListener('abort', waiter.wake, { once: true });
      set.add(waiter);
    });
  }

  /**
   * A tablet that was just (re)hosted may have entries that compactors skipped while it was not: wake a
   * waiter for each queue it has work in.
   */
  private async onHosted(tablets: Set<string>): Promise<void> {
    if (tablets.size === 0 || this.waiters.size === 0) return;
    const perQueue = new Map<string, number>();
    for (const tablet of tablets) {
      for (const col of (await this.store.row(tablet)).keys()) {
        if (col.startsWith(QUEUED_PREFIX)) {
          const queueId = col.slice(QUEUED_PREFIX.length);
          perQueue.set(queueId, (perQueue.get(queueId) ?? 0) + 1);
        }
      }
    }
    this.wake(perQueue);
  }

  private onWritten(rows: Set<string>): void {
    // One wake-up per new entry: waking every idle compactor for one job would only make them race.
    const perQueue = new Map<string, number>();
    for (const row of rows) {
      if (!row.startsWith('~cq:')) continue;
      const queueId = row.slice(4, 8);
      if (!QUEUE_ID_RE.test(queueId)) continue;
      perQueue.set(queueId, (perQueue.get(queueId) ?? 0) + 1);
    }
    this.wake(perQueue);
  }

  /** Wakes `count` waiters of each queue (the longest waiting first). */
  private wake(perQueue: Map<string, number>): void {
    for (const [queueId, count] of perQueue) {
      const set = this.waiters.get(queueId);
      if (!set) continue;
      for (const waiter of [...set].slice(0, count)) {
        this.stats.wakeups++;
        waiter.wake();
      }
    }
  }
}
