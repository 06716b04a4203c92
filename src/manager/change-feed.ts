/**
 * The change feed: which metadata rows the active manager's mutations changed, in the order they were
 * applied, so that a tablet server re-reads the rows of its tablets that changed rather than every row it
 * hosts (what it did every 30 s before: an idle cost that grew with the tablets).
 *
 * Every applied batch that changed a tablet row in a way a tablet server must follow ({@link concernsHosts})
 * gets the next sequence number; the feed keeps the rows of the last `capacity` changes in memory. A reader holds a cursor `{ feed, seq }` and asks for what came after it:
 *   - the rows changed since (without those its own server changed: it knows them), and a new cursor;
 *   - or `reset`: the cursor is of another feed (a new active manager: each has its own, as its memory
 *     starts empty) or older than what is kept, or more rows changed than one answer holds. The reader
 *     then re-reads all it hosts, as it would have before, paced; the new cursor was taken before it
 *     reads, so nothing that changes meanwhile is missed.
 * A reader with no cursor gets `reset` and the head.
 */
import { ulid } from 'ulid';
import { isTabletRow } from '../meta/keys.js';
import { COL_FUTURE, COL_LOC } from '../meta/tablet.js';
import type { RowChange } from './commit-queue.js';

/**
 * Whether a change is one a tablet server may have to re-read its tablet for: a change of a tablet row,
 * and not one of placement alone — a `future` (the server it names is sent a load, the one that hosts
 * the tablet an unload, each sent again until it takes effect, and neither reads `future` again), or a
 * tablet server's own `loc` (it writes only the location of a tablet it loads or lets go). Hosting a
 * table of 100,000 tablets is 200,000 such changes: counted, they reset every reader again and again,
 * and each reset re-reads every tablet it hosts. The manager taking a location away (a table taken
 * offline or deleted, a dead server's tablets) is kept: the server named there must drop the tablet.
 */
export function concernsHosts(change: RowChange): boolean {
  if (!isTabletRow(change.row)) return false;
  const placement = (col: string) => col === COL_FUTURE || (col === COL_LOC && change.origin !== undefined);
  return !change.cols.every(placement);
}

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

  /** Records one applied batch's changes (those that {@link concernsHosts}) under the next sequence number. */
  record(changes: readonly RowChange[]): void {
    const kept = changes.filter(concernsHosts);
    if (kept.length === 0) return;
    const seq = ++this.seq;
    for (const c of kept) {
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
