/**
 * The change feed: which metadata rows the active manager's mutations changed, in the order they were
 * applied, so that a tablet server re-reads the rows of its tablets that changed rather than every row it
 * hosts (what it did every 30 s before: an idle cost that grew with the tablets).
 *
 * Every applied batch gets the next sequence number; the feed keeps the rows of the last `capacity`
 * changes in memory. A reader holds a cursor `{ feed, seq }` and asks for what came after it:
 *   - the rows changed since (without those its own server changed: it knows them), and a new cursor;
 *   - or `reset`: the cursor is of another feed (a new active manager: each has its own, as its memory
 *     starts empty) or older than what is kept, or more rows changed than one answer holds. The reader
 *     then re-reads all it hosts, as it would have before, paced; the new cursor was taken before it
 *     reads, so nothing that changes meanwhile is missed.
 * A reader with no cursor gets `reset` and the head.
 */
import { ulid } from 'ulid';
import type { RowChange } from './commit-queue.js';

export interface FeedCursor {
  feed: string;
  seq: number;
}

export interface FeedAnswer extends FeedCursor {
  /** The cursor given cannot be followed: re-read everything. */
  reset: boolean;
  /** Rows changed after the cursor given, each once (none with `reset`). */
  rows: string[];
}

interface Entry {
  seq: number;
  row: string;
  origin: string | undefined;
}

export class ChangeFeed {
  readonly id = ulid();
  private seq = 0;
  /** A ring of the last `capacity` row changes, oldest at `start`. */
  private readonly ring: (Entry | undefined)[];
  private start = 0;
  private size = 0;
  /** The newest sequence number some of whose rows were pushed out of the ring (0: none yet). */
  private lostUpTo = 0;

  constructor(
    private readonly capacity = 100_000,
    /** The most rows one answer holds; more is a reset. */
    private readonly maxRows = 5_000,
  ) {
    this.ring = new Array<Entry | undefined>(capacity);
  }

  /** Records one applied batch's changes under the next sequence number. */
  record(changes: readonly RowChange[]): void {
    if (changes.length === 0) return;
    const seq = ++this.seq;
    for (const c of changes) {
      const entry: Entry = { seq, row: c.row, origin: c.origin };
      if (this.size < this.capacity) {
        this.ring[(this.start + this.size) % this.capacity] = entry;
        this.size++;
      } else {
        this.lostUpTo = this.ring[this.start]!.seq;
        this.ring[this.start] = entry;
        this.start = (this.start + 1) % this.capacity;
      }
    }
  }

  head(): FeedCursor {
    return { feed: this.id, seq: this.seq };
  }

  /** What changed after `cursor`, leaving out the changes `server` made itself. */
  since(cursor: FeedCursor | undefined, server?: string): FeedAnswer {
    const reset = (): FeedAnswer => ({ ...this.head(), reset: true, rows: [] });
    if (!cursor || cursor.feed !== this.id || cursor.seq > this.seq) return reset();
    if (cursor.seq === this.seq) return { ...this.head(), reset: false, rows: [] };
    // What came after the cursor must all be here: nothing newer than it pushed out.
    if (cursor.seq < this.lostUpTo) return reset();
    const rows = new Set<string>();
    // Newest first, back to the cursor: the answer is usually a few entries at the end of the ring.
    for (let i = this.size - 1; i >= 0; i--) {
      const e = this.ring[(this.start + i) % this.capacity]!;
      if (e.seq <= cursor.seq) break;
      if (server !== undefined && e.origin === server) continue;
      rows.add(e.row);
      if (rows.size > this.maxRows) return reset();
    }
    return { ...this.head(), reset: false, rows: [...rows] };
  }
}
