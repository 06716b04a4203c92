/**
 * A tablet's entries in the compaction queues (`~cq` rows), kept in step with what its planner wants.
 *
 * The tablet row remembers each entry it has (`queued:<queueId>` → the `~cq` row), so moving an entry to a
 * new priority or removing it is part of the same conditional mutation as the change that caused it
 * (a new file, a reservation, a commit, a cancel): the queue can never disagree with the tablet for long.
 */
import { binOf, queueRow } from '../meta/keys.js';
import { queuedCol } from '../meta/tablet.js';
import type { Cell } from '../meta/types.js';
import type { QueueInfo } from './registry.js';

export interface QueueUpdate {
  puts: Cell[];
  deletes: { row: string; col: string }[];
  deleteRows: string[];
  /** queue id → `~cq` row after the update. */
  queued: Map<string, string>;
}

export interface TabletKey {
  row: string;
  tableId: string;
  endRow: Buffer | null;
}

/**
 * The changes that take a tablet from the entries it has (`current`) to one entry per queue in `demand`
 * (queue name → priority). Queues that do not exist (any more) get no entry.
 */
export function queueUpdate(
  tablet: TabletKey,
  current: ReadonlyMap<string, string>,
  demand: ReadonlyMap<string, number>,
  resolve: (name: string) => QueueInfo | undefined,
  now = Date.now(),
): QueueUpdate {
  const wanted = new Map<string, string>();
  for (const [name, priority] of demand) {
    const queue = resolve(name);
    if (!queue) continue;
    wanted.set(
      queue.id,
      queueRow({
        queueId: queue.id,
        bin: binOf(tablet.row, queue.bins),
        priority,
        tableId: tablet.tableId,
        endRow: tablet.endRow,
      }),
    );
  }
  const update: QueueUpdate = { puts: [], deletes: [], deleteRows: [], queued: new Map(wanted) };
  for (const [queueId, row] of current) {
    if (wanted.get(queueId) === row) continue;
    update.deleteRows.push(row);
    if (!wanted.has(queueId)) update.deletes.push({ row: tablet.row, col: queuedCol(queueId) });
  }
  for (const [queueId, row] of wanted) {
    if (current.get(queueId) === row) continue;
    update.puts.push({ row, col: 'tablet', value: JSON.stringify({ tablet: tablet.row, at: now }) });
    update.puts.push({ row: tablet.row, col: queuedCol(queueId), value: row });
  }
  return update;
}

/** When a `~cq` entry was queued, from its `tablet` cell; undefined for a malformed one. */
export function entryQueuedAt(value: string): number | undefined {
  try {
    const at = (JSON.parse(value) as { at?: unknown }).at;
    return typeof at === 'number' ? at : undefined;
  } catch {
    return undefined; // a malformed entry is the check's business (admin check), not a metric's
  }
}
