/**
 * k-way merge of sorted batch sources with a loser tree (a tournament tree that stores the loser of
 * each match): after the winner advances, one replay from its leaf to the root, ⌈log2 k⌉ comparisons,
 * decides the next winner. Sources are read a batch (a data block) at a time; the only awaits are for a
 * source's next batch and, every {@link BATCH_SIZE} kept entries, for the consumer. Entries that compare
 * equal come out in source order.
 *
 * `accept` sees every entry in merged order and says whether it is kept: the stack's rules (stack.ts)
 * run inside the merge loop rather than as further async stages. Output batches may be empty (a
 * heartbeat when many entries in a row are dropped).
 *
 * Entries of file blocks take mergeBlockBatches (merge-blocks.ts) instead: the same tree and output, with
 * offset-value codes.
 */
import { BATCH_SIZE, type BatchSource } from '../batches.js';
import type { Entry } from '../key.js';
import { ENTRY_OPS, type EntryOps } from '../order.js';

/** Entries read between two yields at most, kept or not. */
const HEARTBEAT_ENTRIES = 65_536;

export interface MergeStats {
  /** Entries taken from the sources. */
  entriesRead: number;
}

export interface MergeOptions<T extends Entry> {
  stats?: MergeStats;
  /** The order; default compareEntries (via ENTRY_OPS). */
  compare?: EntryOps<T>['compare'];
  signal?: AbortSignal | undefined;
}

export async function* mergeBatches<T extends Entry = Entry>(
  sources: readonly BatchSource<T>[],
  accept: (e: T) => boolean,
  options: MergeOptions<T> = {},
): AsyncGenerator<T[]> {
  const compare: EntryOps<T>['compare'] = options.compare ?? ENTRY_OPS.compare;
  const k = sources.length;
  const stats = options.stats ?? { entriesRead: 0 };
  const { signal } = options;
  const iterators = sources.map(asyncIterator);
  const batches: (readonly T[])[] = new Array<readonly T[]>(k).fill([]);
  const positions = new Array<number>(k).fill(0);
  // The current entry of each source, null once it is exhausted.
  const heads = new Array<T | null>(k).fill(null);

  const refill = async (i: number): Promise<T | null> => {
    for (;;) {
      const r = await iterators[i]!.next();
      if (r.done) return (heads[i] = null);
      if (r.value.length > 0) {
        batches[i] = r.value;
        positions[i] = 0;
        return (heads[i] = r.value[0]!);
      }
    }
  };

  try {
    if (k === 0) return;
    await Promise.all(sources.map((_, i) => refill(i)));
    signal?.throwIfAborted();

    // tree[0] is the winner; tree[1..k-1] hold the losers of the internal matches. Leaf i sits at
    // position k + i, so the parent of leaf i is (k + i) >> 1; this works for any k, not only powers of 2.
    const tree = new Int32Array(Math.max(k, 1));
    const beats = (a: number, b: number): boolean => {
      const x = heads[a]!;
      const y = heads[b]!;
      if (y === null) return true;
      if (x === null) return false;
      const c = compare(x, y);
      return c < 0 || (c === 0 && a < b);
    };
    const build = (node: number): number => {
      if (node >= k) return node - k;
      const left = build(2 * node);
      const right = build(2 * node + 1);
      if (beats(left, right)) {
        tree[node] = right;
        return left;
      }
      tree[node] = left;
      return right;
    };
    tree[0] = k === 1 ? 0 : build(1);

    let out: T[] = [];
    // Counted locally, published into `stats` at each yield.
    let read = 0;
    for (;;) {
      let w: number = tree[0] ?? 0;
      const e = heads[w];
      if (e === null || e === undefined) break;
      read++;
      if (accept(e)) out.push(e);

      const batch = batches[w]!;
      const next = positions[w]! + 1;
      let h: T | null;
      if (next < batch.length) {
        positions[w] = next;
        h = heads[w] = batch[next]!;
      } else {
        h = await refill(w);
      }
      // Replay the winner's path: at each node the better of the candidate and the stored loser goes up.
      for (let node = (w + k) >> 1; node > 0; node >>= 1) {
        const l = tree[node]!;
        const o = heads[l]!;
        if (o === null) continue;
        if (h !== null) {
          const c = compare(o, h);
          if (c > 0 || (c === 0 && l > w)) continue;
        }
        tree[node] = w;
        w = l;
        h = o;
      }
      tree[0] = w;

      // Also yield (possibly an empty batch) after many entries read: a merge that drops everything still
      // reports progress and notices an abort promptly.
      if (out.length >= BATCH_SIZE || read >= HEARTBEAT_ENTRIES) {
        stats.entriesRead += read;
        read = 0;
        signal?.throwIfAborted();
        yield out;
        out = [];
      }
    }
    stats.entriesRead += read;
    signal?.throwIfAborted();
    if (out.length > 0) yield out;
  } finally {
    // Early exit (error, abort, a consumer that stops): close every source so their streams are released.
    await Promise.allSettled(
      iterators.map(async (it) => {
        await it.return?.();
      }),
    );
  }
}

export function asyncIterator<T>(source: AsyncIterable<T> | Iterable<T>): AsyncIterator<T> {
  if (Symbol.asyncIterator in source) return source[Symbol.asyncIterator]();
  const it = source[Symbol.iterator]();
  return {
    next: async () => it.next(),
    return: async () => it.return?.() ?? { done: true, value: undefined },
  };
}
