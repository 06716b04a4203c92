/**
 * The chaos run's writes: a handful of entries around one letter of the row space (so mostly one tablet)
 * — new rows, overwrites of existing cells, deletes, puts with explicit older timestamps, rows and families
 * meant to be filtered out, puts long expired on a table with a ttl, and counters incremented and reset on
 * a table that sums them (counters.ts) — each kept to the rules that keep the model exact.
 */
import { cellKey } from './model.js';
import type { Rng } from './rng.js';
import type { Op, TableState } from './tables.js';

export const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');
const ROWS_PER_LETTER = 300;
const DAY = 86_400_000;

/**
 * The writers' clock: a put's or a delete's timestamp, a multiple of 4 never used twice (odd timestamps
 * below it are the older puts').
 */
export class WriteClock {
  now = Math.floor(Date.now() / 4) * 4;

  tick(): number {
    this.now += 4;
    return this.now;
  }
}

/** One write: a handful of entries around one letter of the row space (so mostly one tablet). */
export function makeOp(t: TableState, rng: Rng, clock: WriteClock): Op {
  const letter = rng.pick(LETTERS);
  const op: Op = { entries: [], rowGen: t.rowGen, familyGen: t.familyGen };
  const n = rng.int(1, 8);
  const rows = t.spec.rowsPerLetter ?? ROWS_PER_LETTER;
  const plainRow = (): string => `${letter}${String(rng.int(0, rows - 1)).padStart(3, '0')}`;
  const counters = t.model.counters;
  const touched = new Set<string>();
  for (let i = 0; i < n; i++) {
    const kind = rng.weighted({
      increment: counters ? 60 : 0,
      reset: counters ? 3 : 0,
      put: 45,
      overwrite: 22,
      delete: 8,
      older: 8,
      tmpRow: 7,
      family: 5,
      expired: t.spec.ttlMs ? 5 : 0,
    });
    const existing = t.cells.length > 0 ? rng.pick(t.cells) : undefined;
    switch (kind) {
      case 'increment':
      case 'reset': {
        // Not a counter twice in a batch (one stamp), nor an increment beside a reset of it in flight
        // (or a reset beside an increment): counters.ts.
        const cell = {
          row: `${letter}${String(rng.int(0, 19)).padStart(2, '0')}`,
          cf: counters!.family,
          cq: 'c',
        };
        const key = cellKey(cell.row, cell.cf, cell.cq);
        if (touched.has(key) || t.resetting.has(key)) break;
        if (kind === 'reset' && t.puttingTo.has(key)) break;
        touched.add(key);
        op.entries.push(
          kind === 'reset'
            ? { ...cell, ts: 0, delete: true }
            : { ...cell, ts: 0, delta: rng.int(-1_000, 1_000_000) },
        );
        break;
      }
      case 'put': {
        const cell = { row: plainRow(), cf: rng.pick(['a', 'b']), cq: rng.pick(['x', 'y']) };
        const key = cellKey(cell.row, cell.cf, cell.cq);
        if (!t.known.has(key)) {
          t.known.add(key);
          t.cells.push(cell);
        }
        op.entries.push({ ...cell, ts: clock.tick() });
        break;
      }
      case 'overwrite':
        if (existing) op.entries.push({ ...existing, ts: clock.tick() });
        break;
      case 'delete':
        // Not while a put to the cell is in flight: a full compaction may forget the delete before that
        // put lands, and then the put (older than the delete) shows, as the data model says it does.
        if (existing && !t.puttingTo.has(cellKey(existing.row, existing.cf, existing.cq))) {
          const ts = clock.tick();
          t.deletes.set(cellKey(existing.row, existing.cf, existing.cq), ts);
          op.entries.push({ ...existing, ts, delete: true });
        }
        break;
      case 'older':
        if (existing) {
          // Odd timestamps below the clock: never one a plain put or delete used (multiples of 4).
          const key = cellKey(existing.row, existing.cf, existing.cq);
          const ts = clock.now - 4 * rng.int(1, 2_000) - 1;
          const used = t.oldTs.get(key) ?? new Set<number>();
          if (ts > (t.deletes.get(key) ?? -Infinity) && !used.has(ts)) {
            used.add(ts);
            t.oldTs.set(key, used);
            op.entries.push({ ...existing, ts });
          }
        }
        break;
      case 'tmpRow':
        op.entries.push({
          row: `${letter}tmp${t.rowGen}.${String(rng.int(0, 99)).padStart(2, '0')}`,
          cf: 'a',
          cq: 'x',
          ts: clock.tick(),
        });
        break;
      case 'family':
        op.entries.push({ row: plainRow(), cf: `s${t.familyGen}`, cq: 'x', ts: clock.tick() });
        break;
      case 'expired':
        op.entries.push({ row: plainRow(), cf: 'a', cq: 'y', ts: Date.now() - 60 * DAY - rng.int(0, DAY) });
        break;
    }
  }
  return op;
}
