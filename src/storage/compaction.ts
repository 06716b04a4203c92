/**
 * Compaction and scan over files: readers → iterator stack → writer (or the caller).
 *
 * `compactFiles` streams every input once, merges through the stack and streams the output into the
 * store; the output appears under its name only once complete (the store's write is atomic), so a
 * failure or an abort leaves nothing there. When nothing survives the stack no file is written at all.
 * With `checkpoints`, the output is written so that a prefix of it is durable at each checkpoint
 * (parts.ts): an abort then leaves those parts, and a run given the last checkpoint as `resume` writes
 * only the rest — the same bytes as a run that never stopped.
 */
import { ExcError } from '../errors.js';
import { compareBytes, type Entry, type Key } from './key.js';
import { BLOCK_ENTRY_OPS } from './order.js';
import { checkName } from './names.js';
import type { ObjectStore } from './object-store.js';
import { intersectRanges, rangeIsEmpty, type RowRange } from './range.js';
import {
  appendsInPlace,
  composeParts,
  DEFAULT_CHECKPOINT_BYTES,
  DEFAULT_CHECKPOINT_MS,
  writeAppendable,
  writeParts,
  type Checkpoint,
  type CheckpointOptions,
  type PartRef,
} from './parts.js';
import { plainEntry, type BlockEntry } from './rfile/block-entry.js';
import { decodeEncoderState, decodeKeyRecord } from './rfile/encoder-state.js';
import { RFileReader } from './rfile/reader.js';
import {
  DEFAULT_BLOCK_SIZE,
  RFileEncoder,
  type AssembledBlock,
  type BlockFeed,
  type Compression,
  type FileSummary,
} from './rfile/writer.js';
import type { BatchSource } from './batches.js';
import { nativeFeed, runsNatively } from './native-merge.js';
import type { MergeStats } from './iterators/merge.js';
import { compileSettings, type IteratorSettings } from './iterators/settings.js';
import { iteratorStackBatches } from './iterators/stack.js';

export interface CompactionProgress {
  entriesRead: number;
  entriesWritten: number;
  /** Bytes fetched from the store for the inputs (footers included). */
  bytesRead: number;
  /** Bytes of output produced. */
  bytesWritten: number;
  /**
   * Bytes copied rather than merged: of the finished file assembled from its parts after the merge (a
   * store that writes parts, S3: they are read back and written as one object), or, resumed on a store
   * that appends in place, of the checkpointed bytes copied into this attempt's file before the merge
   * goes on. The merge's figures stand still meanwhile, and a job whose figures stand still for the stall
   * timeout is cancelled: this one moves.
   */
  bytesComposed: number;
}

export interface CompactionResult extends CompactionProgress {
  /** True when nothing survived the stack; then no output file exists. */
  empty: boolean;
  output: FileSummary | null;
  /** Bytes of the output that a checkpoint this run resumed from already held (0: not resumed). */
  resumedBytes: number;
  /** The parts the output was composed of, or the earlier attempt's file it continued: garbage once the output is committed. */
  parts: PartRef[];
  /** Whether the merge ran in native code (native-merge.ts) or in JavaScript. */
  nativeMerge: boolean;
}

export interface CompactFilesArgs {
  store: ObjectStore;
  inputs: string[];
  output: string;
  settings: IteratorSettings;
  signal?: AbortSignal;
  onProgress?: (p: CompactionProgress) => void;
  /** Default 1000. */
  progressEveryMs?: number;
  blockSize?: number;
  indexBlockSize?: number;
  compression?: Compression;
  /** Write the output as checkpointed parts (parts.ts) rather than in one stream. */
  checkpoints?: CheckpointOptions;
  /** Go on from this checkpoint of an earlier attempt at the same job (same inputs and settings). */
  resume?: Checkpoint;
  /**
   * Merge in native code when the job allows it and the binding is built (native-merge.ts); false runs
   * the JavaScript merge, which writes the same bytes. Default true.
   */
  nativeMerge?: boolean;
  /** Only the rows in [start, end) (hex; absent: unbounded): a sub-job of a split job. */
  range?: { start?: string; end?: string };
  /**
   * Per input (in the order of `inputs`), the rows of it to read, as ascending, disjoint hex ranges
   * [start, end): the file's fence in a tablet merged from tablets that referenced it for only some of
   * their rows. Null or absent: every row (within `range`). A job with a fence runs the JavaScript merge.
   */
  fences?: (HexSpan[] | null)[];
}

/** A range of rows in hex, [start, end); an absent end is unbounded. */
export interface HexSpan {
  start?: string;
  end?: string;
}

/**
 * What input `i` is read in: its fence's ranges within `rows` (the job's rows), in order; `rows` alone when
 * it has no fence. Empty ranges are left out, so a fence wholly outside the rows reads nothing.
 */
function inputRanges(rows: RowRange, fence: HexSpan[] | null | undefined): RowRange[] {
  if (!fence) return [rows];
  return fence.map((f) => intersectRanges(rows, subJobRange(f))).filter((r) => !rangeIsEmpty(r));
}

/** A reader's batches over several ascending, disjoint ranges, one after the other: still in order. */
async function* batchesIn(
  reader: RFileReader,
  ranges: RowRange[],
  signal: AbortSignal | undefined,
): AsyncGenerator<BlockEntry[]> {
  for (const range of ranges) yield* reader.scanBatches(range, { signal });
}

/** The rows of a sub-job's hex range: start inclusive, end exclusive. */
function subJobRange(range: CompactFilesArgs['range']): RowRange {
  const hex = /^(?:[0-9a-f]{2})*$/;
  for (const end of [range?.start, range?.end]) {
    if (end !== undefined && !hex.test(end)) throw new ExcError('BAD_REQUEST', 'a range end is not hex');
  }
  return {
    ...(range?.start === undefined ? {} : { startRow: Buffer.from(range.start, 'hex') }),
    ...(range?.end === undefined ? {} : { endRow: Buffer.from(range.end, 'hex'), endInclusive: false }),
  };
}

/**
 * Merges `inputs` through the stack into `output`. A corrupt input rejects with CORRUPT_FILE naming the
 * file (and block); an abort via `signal` rejects with its reason; either way nothing is left under
 * `output`. Bad settings or names reject with BAD_REQUEST / INVALID_NAME before anything is read.
 */
export async function compactFiles(args: CompactFilesArgs): Promise<CompactionResult> {
  const { store, inputs, output, signal } = args;
  const settings = compileSettings(args.settings);
  checkInputs(inputs, output);
  signal?.throwIfAborted();

  const resume = args.resume ? decodeEncoderState(args.resume.state) : undefined;
  if (resume && resume.offset !== args.resume?.bytes)
    throw new ExcError('BAD_REQUEST', `checkpoint of ${output}: its state and its parts disagree`);
  const readers = await Promise.all(inputs.map((name) => RFileReader.open(store, name, { signal })));
  const stats: MergeStats = { entriesRead: 0 };
  const encoder = new RFileEncoder(output, {
    blockSize: args.blockSize,
    indexBlockSize: args.indexBlockSize,
    compression: args.compression,
    ...(resume ? { resume } : {}),
  });
  const resumedBytes = resume?.offset ?? 0;
  // Bytes copied rather than merged: an S3 output's parts composed into it, a resumed local output's
  // checkpointed bytes copied into its own file. Reported as they go, so a long copy is not a stall.
  let bytesComposed = 0;
  let composedReportedAt = 0;
  const progress = (): CompactionProgress => ({
    entriesRead: stats.entriesRead,
    entriesWritten: encoder.entries,
    bytesRead: readers.reduce((n, r) => n + r.bytesRead, 0),
    bytesWritten: encoder.offset,
    bytesComposed,
  });
  const everyMs = args.progressEveryMs ?? 1_000;
  const composed = (total: number): void => {
    bytesComposed = total;
    if (args.onProgress && Date.now() - composedReportedAt >= everyMs) {
      composedReportedAt = Date.now();
      args.onProgress(progress());
    }
  };

  // Resumed: each input from the first cell after the checkpoint's last key. The stack decides cell by
  // cell, so the cells after it come out exactly as they would have.
  const after = resume ? decodeKeyRecord(resume.lastKey) : undefined;
  // A sub-job of a split reads only its rows; a range never cuts a row, so each cell is decided whole.
  const rows = subJobRange(args.range);
  let reportedAt = Date.now();
  const tick = (): void => {
    if (args.onProgress && Date.now() - reportedAt >= everyMs) {
      reportedAt = Date.now();
      args.onProgress(progress());
    }
  };
  const readRange = after ? intersectRanges(rows, { startRow: after.row }) : rows;
  const fenced = (args.fences ?? []).some((f) => f != null);
  let batches: AsyncGenerator<Entry[] | AssembledBlock>;
  let feed: BlockFeed | null = null;
  if (args.nativeMerge !== false && runsNatively(settings) && !fenced) {
    feed = nativeFeed({
      readers,
      readRange,
      settings,
      rows,
      after,
      blockSize: args.blockSize ?? DEFAULT_BLOCK_SIZE,
      stats,
      signal,
      // A merge that drops everything yields no block for a long while: it still reports progress.
      onHeartbeat: tick,
    });
    batches = withProgress(feed.blocks[Symbol.asyncIterator](), tick);
  } else {
    const merged = iteratorStackBatches(
      readers.map((r, i) => {
        const ranges = inputRanges(after ? readRange : rows, args.fences?.[i]);
        return after ? cellsAfter(batchesIn(r, ranges, signal), after) : batchesIn(r, ranges, signal);
      }),
      settings,
      { stats, signal, ops: BLOCK_ENTRY_OPS },
    );
    batches = withProgress(merged, tick);
  }
  try {
    // Look at the first batch (or block) before creating anything: an empty result writes no file. (A
    // checkpoint is taken only before an entry, so a resumed run always has one.)
    let first = await batches.next();
    while (!first.done && isEmptyBatch(first.value)) first = await batches.next();
    if (first.done && !resume) {
      args.onProgress?.(progress());
      return {
        ...progress(),
        empty: true,
        output: null,
        resumedBytes,
        parts: [],
        nativeMerge: feed !== null,
      };
    }
    const merged = first.done ? batches : prepend(first.value, batches);
    // The encoder leaves its spare buffers on the feed the merge draws them from.
    if (feed) feed.blocks = merged as AsyncIterable<AssembledBlock>;
    const rest: BatchSource | BlockFeed = feed ?? (merged as AsyncIterable<Entry[]>);
    let size: number;
    let parts: PartRef[] = [];
    if (args.checkpoints || args.resume) {
      const checkpoints = args.checkpoints ?? {
        everyBytes: DEFAULT_CHECKPOINT_BYTES,
        everyMs: DEFAULT_CHECKPOINT_MS,
      };
      if (appendsInPlace(store, args.resume)) {
        ({ parts, size } = await writeAppendable(
          store,
          output,
          encoder,
          rest,
          checkpoints,
          args.resume,
          signal,
          composed,
        ));
      } else {
        ({ parts } = await writeParts(store, output, encoder, rest, checkpoints, args.resume, signal));
        composedReportedAt = Date.now();
        size = await composeParts(store, output, parts, signal, (n) => composed(bytesComposed + n));
      }
    } else {
      ({ size } = await store.write(output, encoder.encode(rest, signal), { signal }));
    }
    const summary = encoder.summary(size);
    args.onProgress?.(progress());
    return { ...progress(), empty: false, output: summary, resumedBytes, parts, nativeMerge: feed !== null };
  } finally {
    // Releases the input streams even if the store failed before it read the body.
    await batches.return(undefined);
  }
}

export interface ScanFilesArgs {
  store: ObjectStore;
  files: string[];
  range?: RowRange;
  /** Per file, the rows of it to read (its fence, as in CompactFilesArgs); null or absent: every row. */
  fences?: (HexSpan[] | null)[];
  /** Scans normally drop delete markers (`dropDeletes: true`); false shows them, for debugging. */
  settings: IteratorSettings;
  signal?: AbortSignal;
}

/** The entries of `files` in `range`, through the same stack as compactions. Throws BAD_REQUEST at once for bad settings. */
export function scanFiles(args: ScanFilesArgs): AsyncIterable<Entry> {
  const settings = compileSettings(args.settings);
  for (const name of args.files) checkName(name);
  return (async function* () {
    const { store, signal } = args;
    const readers = await Promise.all(args.files.map((name) => RFileReader.open(store, name, { signal })));
    const batches = iteratorStackBatches(
      readers.map((r, i) => batchesIn(r, inputRanges(args.range ?? {}, args.fences?.[i]), signal)),
      settings,
      { signal, ops: BLOCK_ENTRY_OPS },
    );
    for await (const batch of batches) {
      for (const e of batch) yield plainEntry(e);
    }
  })();
}

function checkInputs(inputs: string[], output: string): void {
  checkName(output);
  const seen = new Set<string>();
  for (const name of inputs) {
    checkName(name);
    // A file merged twice would count its versions twice.
    if (seen.has(name))
      throw new ExcError('BAD_REQUEST', `input ${name} is listed twice`, { details: { name } });
    seen.add(name);
  }
  if (seen.has(output))
    throw new ExcError('BAD_REQUEST', `output ${output} is also an input`, { details: { name: output } });
}

function isEmptyBatch(batch: Entry[] | AssembledBlock): boolean {
  return Array.isArray(batch) && batch.length === 0;
}

/** The batches, with `tick` (progress reports, when due) before each. */
async function* withProgress<T>(batches: AsyncIterator<T>, tick: () => void): AsyncGenerator<T> {
  for await (const batch of { [Symbol.asyncIterator]: () => batches }) {
    tick();
    yield batch;
  }
}

/** The batches' entries whose cell comes after `last`'s (the sources are sorted). */
async function* cellsAfter<T extends Entry>(batches: AsyncGenerator<T[]>, last: Key): AsyncGenerator<T[]> {
  let skipping = true;
  for await (let batch of batches) {
    if (skipping) {
      let i = 0;
      while (i < batch.length && compareCells(batch[i]!.key, last) <= 0) i++;
      if (i === batch.length) continue;
      batch = batch.slice(i);
      skipping = false;
    }
    yield batch;
  }
}

function compareCells(a: Key, b: Key): number {
  return (
    compareBytes(a.row, b.row) || compareBytes(a.family, b.family) || compareBytes(a.qualifier, b.qualifier)
  );
}

async function* prepend<T>(first: T, rest: AsyncIterator<T>): AsyncGenerator<T> {
  try {
    yield first;
    for (;;) {
      const r = await rest.next();
      if (r.done) return;
      yield r.value;
    }
  } finally {
    await rest.return?.();
  }
}
