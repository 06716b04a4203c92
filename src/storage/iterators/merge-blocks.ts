/**
 * The merge of file blocks (BlockEntry batches): mergeBatches' loser tree, with offset-value codes
 * (rfile/offset-value.ts) so that most matches are one integer compare.
 *
 * Every entry in the tree carries a code relative to the entry it lost to. The losers on the winner's
 * path all lost to the winner, and the winner's successor from its own source has its code relative to
 * the winner (the decoder's, when it is the next entry of the same block; otherwise one comparison,
 * which also checks that the source is in order); so during the replay every code at hand has the same
 * base, and the smaller code is the smaller entry. The loser of such a match keeps its code, which is
 * also its code relative to the new winner, unless the two codes share offset and first symbol: then the
 * loser's new code starts one symbol later (nextCode). Only equal codes need the entries themselves,
 * compared from the symbol after those their codes share; the loser takes the code that comparison gives.
 *
 * The code of each winner relative to the entry output before it also says, for free, whether the two
 * share a cell (they first differ after the qualifier): `accept` gets that as its second argument.
 * Same output as mergeBatches with compareBlockEntries: entries that compare equal come out in source
 * order; test/storage/merge-blocks.test.ts checks the two against each other.
 */
import type { BatchSource } from '../batches.js';
import type { BlockEntry } from '../rfile/block-entry.js';
import {
  compareFrom,
  OVC_CAP,
  OVC_EQUAL,
  OVC_FAR,
  OVC_MIN_OFFSET_CODE,
  OVC_NONE,
  nextCode,
  ovcOffset,
  sameCellByCode,
} from '../rfile/offset-value.js';
import { ExcError } from '../../errors.js';
import { asyncIterator, type MergeStats } from './merge.js';

/** Entries read between two yields at most, kept or not (as mergeBatches). */
const HEARTBEAT_ENTRIES = 65_536;
/**
 * Entries per output batch: four times batches.ts's BATCH_SIZE. Each batch costs a turn of the async
 * generators between the merge and its consumer; with 2,048 the whole stack took about 5% less time on
 * the benchmark's data than with 512 (best of 14 in one process, alternating), and the writer still
 * receives about four 64 KiB blocks' worth at a time.
 */
const OUTPUT_BATCH = 2048;
/**
 * Bytes of blocks an output batch may keep alive, beyond one per source (see BlockTree.keep). An entry
 * is a view of its block (block-entry.ts), so a batch holds every block its entries lie in, however few
 * of their entries it keeps: a filter or the versioning rule that keeps one small entry per 64 KiB–1 MiB
 * block would otherwise let 2,048 entries hold up to 2,048 blocks.
 */
const OUTPUT_BATCH_BYTES = 1 << 20;

/**
 * Says whether an entry is kept. `sameCell`: true when it has the cell (row, family, qualifier) of the
 * entry before it in merged order, false when not, undefined when the merge does not know.
 */
export type BlockAccept = (e: BlockEntry, sameCell: boolean | undefined) => boolean;

export interface MergeBlocksOptions {
  stats?: MergeStats;
  signal?: AbortSignal | undefined;
}

export async function* mergeBlockBatches(
  sources: readonly BatchSource<BlockEntry>[],
  accept: BlockAccept,
  options: MergeBlocksOptions = {},
): AsyncGenerator<BlockEntry[]> {
  const k = sources.length;
  const stats = options.stats ?? { entriesRead: 0 };
  const { signal } = options;
  const iterators = sources.map(asyncIterator);
  const t = new BlockTree(k, accept);
  const refill = async (i: number): Promise<void> => {
    for (;;) {
      const r = await iterators[i]!.next();
      if (r.done) return t.setBatch(i, null);
      if (r.value.length > 0) return t.setBatch(i, r.value);
    }
  };

  try {
    if (k === 0) return;
    await Promise.all(sources.map((_, i) => refill(i)));
    signal?.throwIfAborted();
    t.build();
    for (;;) {
      const r = t.run();
      // Source r's batch ran out under the entry just output: its next batch (the next run replays).
      if (r >= 0) await refill(r);
      if (r === DONE || t.full() || t.read >= HEARTBEAT_ENTRIES) {
        // Also (possibly an empty batch) after many entries read: a merge that drops everything still
        // reports progress and notices an abort promptly.
        stats.entriesRead += t.read;
        t.read = 0;
        signal?.throwIfAborted();
        if (r === DONE) {
          if (t.kept > 0) yield t.take();
          return;
        }
        yield t.take();
      }
    }
  } finally {
    await Promise.allSettled(
      iterators.map(async (it) => {
        await it.return?.();
      }),
    );
  }
}

/** What BlockTree.run returns when every source is exhausted, or when an output batch is due. */
const DONE = -2;
const FLUSH = -1;

/**
 * The loser tree and its codes. The hot loop (run) is synchronous and out of the async generator: V8
 * optimises a plain method's loop far better than one inside an async generator's body (and run is too
 * large to be inlined back into it: see run).
 */
class BlockTree {
  /** tree[0] is the winner; tree[1..k-1] hold the losers. Leaf i sits at k + i (as in mergeBatches). */
  private readonly tree: Int32Array;
  /** codes[i]: the code of heads[i] relative to the entry it last lost to (see the module comment). */
  private readonly codes: Int32Array;
  /** The current entry of each source, null once it is exhausted. */
  private readonly heads: (BlockEntry | null)[];
  private readonly batches: (readonly BlockEntry[])[];
  private readonly positions: Int32Array;
  /** Whether the winner's code is relative to the entry output before it (not for the first). */
  private related = false;
  /**
   * The output batch being filled, made at its full size at once: growing an array by push, from empty
   * to 512 entries, copied it seven times over.
   */
  private out = new Array<BlockEntry>(OUTPUT_BATCH);
  /** Entries in `out`, and the bytes of the blocks they keep alive (beyond one per source: see keep). */
  kept = 0;
  private keptBytes = 0;
  /** The block of the entry each source last added to `out`, in this batch or an earlier one. */
  private readonly lastBlocks: (Buffer | null)[];
  /** Entries read since the stats were last updated. */
  read = 0;
  /**
   * When run returns after outputting an entry: its source, whose new head the next run replays first,
   * and the entry; -1 and null when there is nothing to replay (before the first entry).
   */
  private pending = -1;
  private last: BlockEntry | null = null;
  /**
   * A run: the source that won the last replay as well as the turn before it (-1: none), and `runFloor`,
   * the smallest code of the losers on its path with its last symbol shifted out (`code >> 9`: offset
   * and first symbol). A new head of that source whose code (relative to the entry just output, like
   * theirs) is below it, even so shifted, beats every one of them and shares its offset and first
   * symbol with none: no match on the path changes, nor any loser's code (see nextCode), and the new
   * head wins without a replay. Inputs that come in runs from one file, as most compactions' do, then
   * cost a compare per entry instead of a replay of the whole path.
   */
  private runSource = -1;
  private runFloor = 0;

  constructor(
    private readonly k: number,
    private readonly accept: BlockAccept,
  ) {
    this.tree = new Int32Array(Math.max(k, 1));
    this.codes = new Int32Array(k);
    this.heads = new Array<BlockEntry | null>(k).fill(null);
    this.batches = new Array<readonly BlockEntry[]>(k).fill([]);
    this.positions = new Int32Array(k);
    this.lastBlocks = new Array<Buffer | null>(k).fill(null);
  }

  setBatch(i: number, batch: readonly BlockEntry[] | null): void {
    if (batch === null) {
      this.heads[i] = null;
      return;
    }
    this.batches[i] = batch;
    this.positions[i] = 0;
    this.heads[i] = batch[0]!;
  }

  /** The entries kept since the last call, as a batch of their number. */
  take(): BlockEntry[] {
    const out = this.out;
    out.length = this.kept;
    this.out = new Array<BlockEntry>(OUTPUT_BATCH);
    this.kept = 0;
    this.keptBytes = 0;
    return out;
  }

  /** Whether the output batch is due: by its entries, or by the bytes of blocks they keep alive. */
  full(): boolean {
    return this.kept >= OUTPUT_BATCH || this.keptBytes >= OUTPUT_BATCH_BYTES;
  }

  /**
   * Adds source w's entry e to the output batch, counting its block's bytes when the batch did not
   * hold that block yet. A source's entries come in file order, so its blocks come one after the other
   * and never again: an entry whose block is not that of the entry last kept from the same source is in
   * a block no entry of the batch held. One pointer compare per entry kept. The blocks last kept are not
   * forgotten when a batch goes, so a batch's first block from each source may be one the batch before
   * counted: a batch holds at most OUTPUT_BATCH_BYTES of blocks (plus the block that passed it) beyond
   * one block per source. Counting every batch from zero instead would count each source's current
   * block again in every batch: ten sources of 64 KiB blocks would be most of the limit at once.
   *
   * Blocks, not what lies under them: an uncompressed block is a view of the stream chunk it came in
   * (ByteQueue; 256 KiB from the local and memory stores), which it keeps alive whole: with such files
   * a batch may hold up to a chunk per block counted (4 MiB for 64 KiB blocks). Counting the chunks
   * instead cut the benchmark's batches short (its ten sources pass a chunk's end together, 2.5 MiB of
   * new chunks within one batch: 1,112 batches instead of 977), and compressed blocks, the default, are
   * buffers of their own.
   */
  private keep(w: number, e: BlockEntry): void {
    this.out[this.kept++] = e;
    const block = e.block;
    if (block === this.lastBlocks[w]) return;
    this.lastBlocks[w] = block;
    this.keptBytes += block.length;
  }

  /** The smallest code of the losers on source w's path, its last symbol shifted out (see runSource). */
  private pathFloor(w: number): number {
    const { tree, codes } = this;
    let floor = OVC_NONE;
    for (let node = (w + this.k) >> 1; node > 0; node >>= 1) {
      const c = codes[tree[node]!]! >> 9;
      if (c < floor) floor = c;
    }
    return floor;
  }

  /** The first tournament, with every match compared in full. */
  build(): void {
    const { k, heads, tree, codes } = this;
    const match = (node: number): number => {
      if (node >= k) return node - k;
      const left = match(2 * node);
      const right = match(2 * node + 1);
      const x = heads[left]!;
      const y = heads[right]!;
      let c: number;
      if (y === null) c = x === null ? 0 : -OVC_NONE;
      else if (x === null) c = OVC_NONE;
      else c = compareFrom(x, y, 0);
      // Equal heads: the lower source wins, as in the replay (with k not a power of two, a left subtree
      // can hold higher sources than its right). An exhausted loser keeps OVC_NONE even against another
      // exhausted source.
      if (c < 0 || (c === 0 && left < right)) {
        tree[node] = right;
        codes[right] = y === null ? OVC_NONE : -c;
        return left;
      }
      tree[node] = left;
      codes[left] = x === null ? OVC_NONE : c;
      return right;
    };
    tree[0] = k === 1 ? 0 : match(1);
  }

  /**
   * Outputs entries until every source is exhausted (DONE), an output batch may be due (FLUSH), or the
   * winner's source needs its next batch (its index). Each turn first replays the path of the source
   * whose head changed under the entry output before (what the turn before, or the last call, left),
   * then outputs the new winner.
   *
   * The replay is written out here, not a method of its own: V8 inlines a method run calls into it
   * only while its inlining budget lasts, and spent that on inlining run itself, with the rules and
   * keep, into the async generator, which then called the replay for every entry (3–4% of the whole
   * stack's time; bench/README.md, "Where the merge's time goes"). Written out, run is too large to be
   * inlined there, so V8 compiles it alone, the rules and the replay's helpers inlined into it.
   */
  run(): number {
    const { heads, batches, positions, codes, tree, k } = this;
    let w = this.pending;
    let e = this.last;
    for (;;) {
      if (w >= 0) {
        // Source w's new head h follows e: its code relative to e, then the replay of its path, on
        // which every code met is relative to e.
        let h: BlockEntry | null = heads[w] ?? null;
        let hc: number;
        if (h === null) hc = OVC_NONE;
        else if (h.start === e!.end && h.block === e!.block) {
          // Its successor in the same block: the decoder's code, relative to e, checked in order.
          hc = h.ovc;
        } else {
          const c = compareFrom(e!, h, 0);
          if (c > 0) throw new ExcError('INTERNAL', `merge source ${w} is out of order`);
          hc = -c;
        }
        if (w === this.runSource && hc >> 9 < this.runFloor) {
          // Still ahead of every loser on its path (see runSource): the winner again, tree unchanged.
          codes[w] = hc;
        } else {
          const changed = w;
          for (let node = (w + k) >> 1; node > 0; node >>= 1) {
            const l = tree[node]!;
            let lc = codes[l]!;
            if (lc !== hc) {
              // Codes with the same offset and first symbol: the loser's code relative to the winner
              // starts at its second symbol (nextCode).
              const shared = lc >> 9 === hc >> 9 && lc >= OVC_MIN_OFFSET_CODE;
              if (lc > hc) {
                if (shared) codes[l] = nextCode(heads[l]!, lc);
                continue;
              }
              tree[node] = w;
              codes[w] = shared ? nextCode(h!, hc) : hc;
              w = l;
              hc = lc;
              h = heads[l]!;
              continue;
            }
            // Equal codes: both agree with e up to the two symbols they share (or are both exhausted,
            // or both equal to e).
            if (lc === OVC_NONE) continue;
            let c = 0;
            if (lc !== OVC_EQUAL)
              c = compareFrom(heads[l]!, h!, lc === OVC_FAR ? OVC_CAP : ovcOffset(lc) + 2);
            if (c < 0 || (c === 0 && l < w)) {
              tree[node] = w;
              codes[w] = -c;
              w = l;
              h = heads[l]!;
            } else {
              lc = c;
              codes[l] = lc;
            }
          }
          tree[0] = w;
          codes[w] = hc;
          this.runSource = w === changed ? w : -1;
          if (w === changed) this.runFloor = this.pathFloor(w);
        }
        this.related = true;
      }
      // The winner: output, and its source's next entry made its head.
      w = tree[0]!;
      e = heads[w] ?? null;
      if (e === null) {
        this.pending = -1;
        return DONE;
      }
      this.read++;
      if (this.accept(e, this.related ? sameCellByCode(e, codes[w]!) : undefined)) this.keep(w, e);
      const batch = batches[w]!;
      const next = positions[w]! + 1;
      if (next >= batch.length) {
        this.pending = w;
        this.last = e;
        return w;
      }
      positions[w] = next;
      heads[w] = batch[next]!;
      if (this.full() || this.read >= HEARTBEAT_ENTRIES) {
        this.pending = w;
        this.last = e;
        return FLUSH;
      }
    }
  }
}
