/**
 * The combination of combined cells (table-iterators.ts), after the merge and the cell rules (stack.ts):
 * the run of a combined cell's kept puts, newest first, becomes one plain entry — the newest put's key,
 * the combination of the values — or nothing, when its family's age-off drops its newest put. Runs only
 * where puts may be combined (scans, compactions that drop deletes): the rules then kept every live put
 * of such a cell and no delete marker.
 *
 * A run that goes on into the next batch is combined so far into a copy: the batch's entries may be
 * views of blocks the merge uses again once it has moved on (sum, min, max and latest are associative,
 * and a value that is no integer is left out either way).
 */
import type { Entry, Key } from '../key.js';
import { ENTRY_OPS } from '../order.js';
import type { CompiledSettings } from './settings.js';
import { combineValues, type CombineOp, type CompiledTableIterators } from './table-iterators.js';

// The generic comparisons: the run's first entry may be a copy, not a block's entry.
const { sameCell, isDelete } = ENTRY_OPS;

/** A copy of the key and the value in one allocation (the run's entries may be views of blocks). */
function copied(k: Key, value: Buffer): Entry {
  const { row, family, qualifier } = k;
  const b = Buffer.allocUnsafe(row.length + family.length + qualifier.length + value.length);
  let at = row.copy(b, 0);
  const f = at;
  at += family.copy(b, at);
  const q = at;
  at += qualifier.copy(b, at);
  const v = at;
  value.copy(b, at);
  return {
    key: {
      row: b.subarray(0, f),
      family: b.subarray(f, q),
      qualifier: b.subarray(q, v),
      timestamp: k.timestamp,
      deleted: false,
    },
    value: b.subarray(v),
  };
}

export async function* combineBatches<T extends Entry>(
  batches: AsyncIterable<T[]>,
  table: CompiledTableIterators,
  settings: Pick<CompiledSettings, 'cutoff' | 'nowMs'>,
): AsyncGenerator<Entry[]> {
  /** The current combined cell's puts so far (the first may be a copy combining earlier batches'). */
  let run: Entry[] = [];
  let op: CombineOp = 'latest';
  const combined = (): Entry => copied(run[0]!.key, combineValues(op, run));
  const end = (out: Entry[]): void => {
    if (run.length === 0) return;
    const newest = run[0]!.key.timestamp;
    const cutoff = Math.max(settings.cutoff, table.cutoffOf(run[0]!, settings.nowMs));
    if (!(cutoff > 0 && newest < cutoff)) out.push(combined());
    run = [];
  };
  for await (const batch of batches) {
    const out: Entry[] = [];
    for (const e of batch) {
      if (run.length > 0 && !isDelete(e) && sameCell(run[0]!, e)) {
        run.push(e);
        continue;
      }
      end(out);
      const next = isDelete(e) ? null : table.combinerOf(e);
      if (next === null) out.push(e);
      else {
        op = next;
        run.push(e);
      }
    }
    if (run.length > 0) run = [combined()];
    if (out.length > 0) yield out;
  }
  const out: Entry[] = [];
  end(out);
  if (out.length > 0) yield out;
}
