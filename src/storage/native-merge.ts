/**
 * The compaction merge in native code (native/merge.c): the inputs' data blocks, decompressed, go in;
 * the output's data blocks, assembled, come out for the writer to compress and place. Per entry, nothing
 * is done in JavaScript: no object, no comparison, no copy. It gives the same bytes as the merge through
 * the iterator stack and the writer (test/storage/native-merge.test.ts compares them on random inputs),
 * which stays the reference, and is what runs when:
 *   - the job has filters (JavaScript predicates, filters.ts);
 *   - the binding is not built (scripts/setup.mjs builds it with node-gyp, as it rebuilds the other
 *     native packages; a machine without a compiler runs the JavaScript merge);
 *   - the compaction asks for the JavaScript merge (EXC_NATIVE_MERGE=false for a compactor: to compare
 *     the two, or to rule the native code out).
 *
 * Memory: the merge holds each input's current block and the one before it (the entry merged last may
 * lie there), and the output block; every buffer is a JavaScript Buffer, so the heap's limits apply.
 */
import { createRequire } from 'node:module';
import { ExcError } from '../errors.js';
import type { Key } from './key.js';
import type { RowRange } from './range.js';
import { BLOCK_HEADER_SIZE } from './rfile/codec.js';
import { BufferPool } from './rfile/buffer-pool.js';
import type { RFileReader } from './rfile/reader.js';
import type { AssembledBlock, BlockFeed } from './rfile/writer.js';
import type { CompiledSettings } from './iterators/settings.js';
import type { MergeStats } from './iterators/merge.js';

interface Binding {
  create(k: number, options: NativeOptions): unknown;
  setBlock(handle: unknown, source: number, payload: Buffer | null, count: number): string | undefined;
  setOutput(handle: unknown, block: Buffer, start: number): void;
  resize(handle: unknown, block: Buffer): void;
  run(handle: unknown, figures: Float64Array): number;
  /** The output block's families in the order met, with their entries, and the other families' entries. */
  families(handle: unknown): [[Buffer, number][], number];
  /** The slots of run's figures the binary fills (absent: built from an older source). */
  figures?: number;
}

interface NativeOptions {
  versions: number;
  cutoff: number;
  dropDeletes: boolean;
  blockSize: number;
  startRow: Buffer | null;
  startInclusive: boolean;
  endRow: Buffer | null;
  endInclusive: boolean;
  afterRow: Buffer | null;
  afterFamily: Buffer | null;
  afterQualifier: Buffer | null;
}

const DONE = -2;
const FLUSH = -1;
const SEAL = -3;
const GROW = -4;
/**
 * The slots of run's figures (merge.c, Run): [0] the end of the output block's entries, [1] its entry
 * count, [2] and [3] its last entry's start and end, [4] that entry ends a cell, [5] entries merged so
 * far, [6] bytes needed (GROW), [7] the block's delete markers, [8] and [9] its oldest and newest timestamp,
 * [10] and [11] its key bytes (row, family, qualifier) and value bytes.
 */
const FIGURES = 12;

/** Where `npm run setup` builds the binding, from this file in src/storage or dist/storage. */
const BINDING = new URL('../../native/build/Release/excompact_merge.node', import.meta.url);

let binding: Binding | null | undefined;

/**
 * The binding, or null when it is not built, or was built from an older merge.c (`npm run setup`
 * rebuilds it): such a binary fills fewer figures, counts no families, and its files would report
 * wrong stats.
 */
export function nativeMerge(): Binding | null {
  if (binding !== undefined) return binding;
  try {
    const loaded = createRequire(import.meta.url)(BINDING.pathname) as Binding;
    binding = loaded.figures === FIGURES ? loaded : null;
  } catch {
    binding = null;
  }
  return binding;
}

/** Whether a merge with these settings can run natively: no filters, and the binding built. */
export function runsNatively(settings: CompiledSettings): boolean {
  // Filters and table iterators run in the JavaScript stack only.
  return settings.filter === null && settings.table === null && nativeMerge() !== null;
}

export interface NativeFeedArgs {
  readers: RFileReader[];
  /** What each reader reads (its first and last blocks may hold rows outside `rows`). */
  readRange: RowRange;
  settings: CompiledSettings;
  /** The rows to merge (a split's sub-job); entries outside are skipped. */
  rows: RowRange;
  /** Only the cells after this key's (a resumed run). */
  after: Key | undefined;
  blockSize: number;
  stats: MergeStats;
  signal: AbortSignal | undefined;
  /** Called every 65,536 entries merged, kept or not. */
  onHeartbeat?: () => void;
}

/** The merged, assembled output blocks of a compaction, for RFileEncoder.encodeMarked. */
export function nativeFeed(args: NativeFeedArgs): BlockFeed {
  const feed: BlockFeed = { kind: 'blocks', blocks: { [Symbol.asyncIterator]: () => blocks }, spare: null };
  const blocks = assemble(args, feed);
  return feed;
}

async function* assemble(args: NativeFeedArgs, feed: BlockFeed): AsyncGenerator<AssembledBlock> {
  const native = nativeMerge();
  if (native === null) throw new ExcError('INTERNAL', 'the native merge is not available');
  const { settings, rows, after, blockSize, stats, signal } = args;
  // Decompressed blocks, used again once the merge is done with them (BufferPool).
  const pool = new BufferPool(POOLED_BYTES, POOL_LIMIT);
  const iterators = args.readers.map((r) =>
    r.rawBlocks(args.readRange, { signal, alloc: pool.take })[Symbol.asyncIterator](),
  );
  const k = iterators.length;
  // Each source's current block and the one before it: the native side points into both.
  const current: (Buffer | null)[] = new Array<Buffer | null>(k).fill(null);
  const previous: (Buffer | null)[] = new Array<Buffer | null>(k).fill(null);
  const handle = native.create(Math.max(k, 1), {
    versions: settings.versions,
    cutoff: settings.cutoff,
    dropDeletes: settings.dropDeletes,
    blockSize,
    startRow: rows.startRow === undefined ? null : Buffer.from(rows.startRow),
    startInclusive: rows.startInclusive !== false,
    endRow: rows.endRow === undefined ? null : Buffer.from(rows.endRow),
    endInclusive: rows.endInclusive === true,
    afterRow: after ? Buffer.from(after.row) : null,
    afterFamily: after ? Buffer.from(after.family) : null,
    afterQualifier: after ? Buffer.from(after.qualifier) : null,
  });
  const refill = async (i: number): Promise<void> => {
    const r = await iterators[i]!.next();
    // The block before the one just finished: nothing points into it any more.
    pool.give(previous[i]!);
    previous[i] = current[i]!;
    if (r.done) {
      current[i] = null;
      native.setBlock(handle, i, null, 0);
      return;
    }
    const { payload, count } = r.value;
    current[i] = payload;
    const error = native.setBlock(handle, i, payload, count);
    if (error === undefined) return;
    if (error.startsWith('merge source')) throw new ExcError('INTERNAL', error);
    throw r.value.corrupt(error);
  };
  const fresh = (): Buffer => {
    const spare = feed.spare;
    feed.spare = null;
    return spare !== null && spare.length >= BLOCK_HEADER_SIZE + blockSize
      ? spare
      : Buffer.allocUnsafe(BLOCK_HEADER_SIZE + blockSize);
  };
  const figures = new Float64Array(FIGURES);
  let out = fresh();
  // Its families are asked for before setOutput starts the next block (which forgets them).
  const sealed = (final: boolean): AssembledBlock => {
    const [families, otherFamilies] = native.families(handle);
    return {
      block: out,
      pos: figures[0]!,
      count: figures[1]!,
      lastStart: figures[2]!,
      lastEnd: figures[3]!,
      boundary: !final && figures[4] === 1,
      final,
      deletes: figures[7]!,
      oldestTs: figures[8]!,
      newestTs: figures[9]!,
      keyBytes: figures[10]!,
      valueBytes: figures[11]!,
      families,
      otherFamilies,
    };
  };
  try {
    if (k === 0) return;
    await Promise.all(iterators.map((_, i) => refill(i)));
    signal?.throwIfAborted();
    native.setOutput(handle, out, BLOCK_HEADER_SIZE);
    let counted = 0;
    for (;;) {
      const r = native.run(handle, figures);
      stats.entriesRead += figures[5]! - counted;
      counted = figures[5]!;
      if (r >= 0) {
        await refill(r);
      } else if (r === SEAL) {
        yield sealed(false);
        out = fresh();
        native.setOutput(handle, out, BLOCK_HEADER_SIZE);
      } else if (r === GROW) {
        // An entry larger than a block: a buffer of its size, with what the block holds so far.
        const grown = Buffer.allocUnsafe(figures[6]!);
        out.copy(grown, 0, 0, figures[0]);
        out = grown;
        native.resize(handle, out);
      } else if (r === DONE) {
        if (figures[1]! > 0) yield sealed(true);
        return;
      } else if (r === FLUSH) {
        args.onHeartbeat?.();
      } else {
        throw new ExcError('INTERNAL', `the native merge returned ${r}`);
      }
      signal?.throwIfAborted();
    }
  } finally {
    await Promise.allSettled(iterators.map(async (it) => it.return(undefined)));
  }
}

/** Blocks of at most this many bytes are decompressed into pooled buffers (twice the default block). */
const POOLED_BYTES = 128 * 1024;
/** Buffers a pool keeps for reuse at most: three per source in use at once is the most a merge needs. */
const POOL_LIMIT = 64;
