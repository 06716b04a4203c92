/**
 * The streaming RFile writer (format in codec.ts). Entries go in, in order; encoded blocks come out as
 * a byte stream that the object store writes under a temporary name or as a multipart upload, so a file
 * appears under its name only once complete. Memory: the current data block, the current index block,
 * the root, and with deflate up to {@link COMPRESSION_DEPTH} blocks being deflated on the thread pool
 * while the next ones are encoded (lz4 and zstd compress each block as it is sealed, compression.ts).
 * The summary's stats (delete markers, timestamps, key and value bytes, families) are counted as entries
 * go in (file-stats.ts).
 */
import { ExcError } from '../../errors.js';
import type { BatchSource } from '../batches.js';
import { formatKey, sameCell, type Entry, type Key } from '../key.js';
import { entryOrder } from '../order.js';
import { BlockEntry, decodeDataBlock } from './block-entry.js';
import {
  BLOCK_HEADER_SIZE,
  CODEC_DEFLATE,
  CODEC_NONE,
  encodeFooter,
  encodeKeyRecord,
  entrySize,
  MAX_BLOCK_BYTES,
  writeBlockHeader,
  writeEntry,
} from './codec.js';
import { decodeKeyRecord, type EncoderState } from './encoder-state.js';
import { checkEntry, copyKey, dataHeader, grow, positive } from './encoder-util.js';
import { BufferPool, Lender } from './buffer-pool.js';
import { FileStatsCounter } from './file-stats.js';
import { IndexBlocks } from './index-blocks.js';

export { copyKey } from './encoder-util.js';
import { codecOf, compressSync, deflateBlock, DEFAULT_COMPRESSION } from './compression.js';

export type { Compression } from './compression.js';
export type { EncoderState } from './encoder-state.js';
export * from './writer-types.js';
import {
  DEFAULT_BLOCK_SIZE,
  DEFAULT_INDEX_BLOCK_SIZE,
  isBlockFeed,
  type AssembledBlock,
  type BlockFeed,
  type EncodedChunk,
  type FileSummary,
  type PendingBlock,
  type RFileWriteOptions,
  type SealedBlock,
} from './writer-types.js';

/** The first buffers of a file are this small and grow as needed: most flushes are a few KiB. */
const FIRST_BUFFER = 4 * 1024;
/** Blocks being deflated at once, on the thread pool, while the next block is encoded. */
const COMPRESSION_DEPTH = 2;
const NO_VALUE = Buffer.alloc(0);

/** Turns sorted entries into the bytes of one file. Single use. */
export class RFileEncoder {
  private readonly blockSize: number;
  private readonly indexBlockSize: number;
  private readonly codec: number;

  private block: Buffer;
  /** The end of the block's entries, the run not yet copied included (copyRun). */
  private pos = BLOCK_HEADER_SIZE;
  /** File entries added but not copied yet: bytes [runStart, runEnd) of a decoded block, ending at pos. */
  private runBlock: Buffer | null = null;
  private runStart = 0;
  private runEnd = 0;
  private count = 0;
  private last: Entry | null = null;
  private firstKey: Key | null = null;
  private sealedDataBlocks = 0;

  private indexes: IndexBlocks;

  private readonly pending: PendingBlock[] = [];
  private out: EncodedChunk[] = [];
  /** What zstd compresses blocks (of the default size, twice) into: free again once handed out (handOut). */
  private readonly compressed = new Lender(new BufferPool(128 * 1024, 8));
  private placedDataBlocks = 0;
  private placedEntries = 0;
  private readonly stats: FileStatsCounter;
  /** Offset from which the next block placed that ends a cell is followed by a checkpoint. */
  private cutAt = Infinity;
  private cutEvery = Infinity;

  /** Entries accepted so far. */
  entries = 0;
  /** Bytes produced so far. */
  offset = 0;

  constructor(
    /** For error messages. */
    private readonly file: string,
    options: RFileWriteOptions = {},
  ) {
    this.blockSize = positive(options.blockSize ?? DEFAULT_BLOCK_SIZE, 'blockSize');
    this.indexBlockSize = positive(options.indexBlockSize ?? DEFAULT_INDEX_BLOCK_SIZE, 'indexBlockSize');
    this.codec = codecOf(options.compression ?? DEFAULT_COMPRESSION);
    // Small at first, grown on demand (add, placeDataBlock): a file of a few entries, as most flushes
    // are, should not cost two 64 KiB allocations.
    this.block = Buffer.allocUnsafe(Math.min(BLOCK_HEADER_SIZE + this.blockSize, FIRST_BUFFER));
    this.indexes = new IndexBlocks(this.indexBlockSize, options.resume);
    this.stats = new FileStatsCounter(options.resume);
    if (options.resume) this.restore(options.resume);
  }

  private restore(s: EncoderState): void {
    this.offset = s.offset;
    this.entries = this.placedEntries = s.entries;
    this.sealedDataBlocks = this.placedDataBlocks = s.blocks;
    this.firstKey = decodeKeyRecord(s.firstKey);
    // Only its key matters: the next entry is in a later cell, so the order check never reaches values.
    this.last = { key: decodeKeyRecord(s.lastKey), value: Buffer.alloc(0) };
  }

  /**
   * Asks for a checkpoint: the first data block placed that ends a cell and ends at or after byte `offset`
   * of the file is followed, in {@link encodeMarked}'s output, by the encoder's state right after it.
   * A checkpoint never changes the file's bytes.
   */
  requestCheckpoint(offset = 0): void {
    this.cutAt = offset;
  }

  /** Asks for a checkpoint about every `bytes` bytes of the file ({@link requestCheckpoint}). */
  checkpointEvery(bytes: number): void {
    this.cutEvery = bytes;
    this.cutAt = this.offset + bytes;
  }

  /** The file's bytes as the batches are consumed; a chunk is valid until the next is asked for. */
  async *encode(batches: BatchSource | BlockFeed, signal?: AbortSignal): AsyncGenerator<Buffer> {
    for await (const chunk of this.encodeMarked(batches, signal)) if (Buffer.isBuffer(chunk)) yield chunk;
  }

  /** {@link encode}, with the checkpoints asked for ({@link requestCheckpoint}) where they fall. */
  async *encodeMarked(source: BatchSource | BlockFeed, signal?: AbortSignal): AsyncGenerator<EncodedChunk> {
    if (isBlockFeed(source)) {
      for await (const block of source.blocks) {
        signal?.throwIfAborted();
        this.addAssembled(block);
        // The buffer for the next block: sealing left this.block free (see sealDataBlock).
        source.spare = this.block;
        while (this.pending.length > COMPRESSION_DEPTH) await this.placeOldestPending();
        if (this.out.length > 0) yield* this.handOut();
      }
    } else {
      for await (const batch of source) {
        signal?.throwIfAborted();
        for (let i = 0; i < batch.length; i++) this.add(batch[i]!);
        while (this.pending.length > COMPRESSION_DEPTH) await this.placeOldestPending();
        if (this.out.length > 0) yield* this.handOut();
      }
    }
    signal?.throwIfAborted();
    this.cutAt = Infinity;
    if (this.count > 0) this.sealDataBlock(false);
    while (this.pending.length > 0) await this.placeOldestPending();
    if (this.indexes.count > 0) this.sealIndexBlock();
    const footer = encodeFooter({
      entryCount: this.entries,
      dataBlocks: this.placedDataBlocks,
      firstKey: this.firstKey ? encodeKeyRecord(this.firstKey) : null,
      lastKey: this.last ? encodeKeyRecord(this.last.key) : null,
      root: this.indexes.root,
    });
    this.out.push(footer);
    this.offset += footer.length;
    yield* this.takeOutput();
  }

  summary(size: number): FileSummary {
    if (size !== this.offset) {
      throw new ExcError(
        'INTERNAL',
        `writing ${this.file}: the store wrote ${size} bytes, the encoder produced ${this.offset}`,
      );
    }
    const stats = this.stats.placedStats();
    return {
      entries: this.entries,
      size,
      firstKey: this.firstKey,
      lastKey: this.last ? copyKey(this.last.key) : null,
      blocks: this.placedDataBlocks,
      ...(stats ? { stats } : {}),
    };
  }

  add(e: Entry): void {
    const isBlockEntry = e instanceof BlockEntry;
    if (!isBlockEntry) checkEntry(e, this.file, this.entries);
    const last = this.last;
    // The entry right after the last one in the same decoded block: the decoder checked their order
    // (decodeDataBlock), and their bytes are one range to copy (see copyRun).
    const follows =
      isBlockEntry && last instanceof BlockEntry && last.block === e.block && last.end === e.start;
    if (!follows && last !== null && entryOrder(last, e) > 0) {
      throw new ExcError(
        'BAD_REQUEST',
        `writing ${this.file}: entries out of order: ${formatKey(e.key)} after ${formatKey(last.key)} (entry ${this.entries}); entries must be sorted by key, and by value when keys are equal`,
        { details: { file: this.file } },
      );
    }
    const size = isBlockEntry ? e.end - e.start : entrySize(e.key, e.value.length);
    if (size > MAX_BLOCK_BYTES) {
      throw new ExcError(
        'BAD_REQUEST',
        `writing ${this.file}: entry ${formatKey(e.key)} is larger than ${MAX_BLOCK_BYTES} bytes`,
      );
    }
    if (this.count > 0 && this.pos - BLOCK_HEADER_SIZE + size > this.blockSize)
      this.sealDataBlock(!sameCell(this.last!.key, e.key));
    if (this.pos + size > this.block.length) {
      this.copyRun();
      this.block = grow(this.block, this.pos, this.pos + size);
    }
    if (isBlockEntry) {
      // Same format version: the encoded bytes are the encoding. Copied when the run they extend ends.
      if (this.runBlock === e.block && this.runEnd === e.start) {
        this.runEnd = e.end;
      } else {
        this.copyRun();
        this.runBlock = e.block;
        this.runStart = e.start;
        this.runEnd = e.end;
      }
      this.pos += size;
    } else {
      this.copyRun();
      this.pos = writeEntry(this.block, this.pos, e.key, e.value);
    }
    if (this.entries === 0) this.firstKey = copyKey(e.key);
    if (isBlockEntry) this.stats.blockEntry(e);
    else this.stats.entry(e);
    this.count++;
    this.entries++;
    this.last = e;
  }

  /**
   * A data block assembled by the native merge (native-merge.ts): the same bytes add() would have put
   * in the block, sealed where add() would have sealed it. Never mixed with add().
   */
  private addAssembled(a: AssembledBlock): void {
    if (this.count > 0 || a.count < 1)
      throw new ExcError('INTERNAL', `writing ${this.file}: an assembled block among entries`);
    const lastEntry = decodeDataBlock(a.block.subarray(a.lastStart, a.lastEnd), 1)[0]!;
    if (this.entries === 0) {
      const first = decodeDataBlock(a.block.subarray(BLOCK_HEADER_SIZE, a.pos), a.count)[0]!;
      this.firstKey = copyKey(first.key);
    }
    this.block = a.block;
    this.pos = a.pos;
    this.count = a.count;
    this.entries += a.count;
    this.last = { key: copyKey(lastEntry.key), value: NO_VALUE };
    this.stats.assembled(a);
    // As encodeMarked does before it seals the last block of entries: no checkpoint after it.
    if (a.final) this.cutAt = Infinity;
    this.sealDataBlock(a.boundary);
  }

  /**
   * Copies the run of file entries added last into the block, where `pos` already counts it. Entries
   * that follow each other in one decoded block go in with one copy: a Buffer.copy of an entry (~130
   * bytes) costs ~95 ns, mostly the view Node makes of the source range, so a compaction whose inputs
   * barely overlap (most entries come in long runs from one file) copied each entry for nothing.
   */
  private copyRun(): void {
    const block = this.runBlock;
    if (block === null) return;
    block.copy(this.block, this.pos - (this.runEnd - this.runStart), this.runStart, this.runEnd);
    this.runBlock = null;
  }

  /** `boundary`: the block's last entry ends a cell (a checkpoint may follow it). */
  private sealDataBlock(boundary: boolean): void {
    this.copyRun();
    const rawLength = this.pos - BLOCK_HEADER_SIZE;
    const number = this.sealedDataBlocks++;
    const count = this.count;
    const lastKey = encodeKeyRecord(this.last!.key);
    const sealed: SealedBlock = { count, lastKey, boundary, stats: this.stats.seal() };
    const block = this.block;
    const payload = block.subarray(BLOCK_HEADER_SIZE, this.pos);
    let reusable = false;
    if (this.codec === CODEC_NONE) {
      this.placeStoredBlock(block.subarray(0, this.pos), payload, number, rawLength, sealed);
    } else if (this.codec === CODEC_DEFLATE) {
      const done = deflateBlock(payload).then((compressed) => {
        const header = Buffer.allocUnsafe(BLOCK_HEADER_SIZE);
        // A block that does not shrink is stored as is: never pay inflate for nothing.
        const stored = compressed.length < rawLength ? compressed : payload;
        const codec = stored === compressed ? CODEC_DEFLATE : CODEC_NONE;
        writeBlockHeader(header, 0, dataHeader(codec, number, stored, rawLength, count));
        return { chunks: [header, stored], length: BLOCK_HEADER_SIZE + stored.length };
      });
      // Awaited in order by placeOldestPending; until then a failure must not be an unhandled rejection.
      done.catch(() => undefined);
      this.pending.push({ done, sealed });
    } else {
      const compressed = compressSync(this.codec, payload, this.compressed.lend);
      if (compressed.length < rawLength) {
        // The compressed bytes are elsewhere (lent memory, or lz4's): the block buffer can take the next block.
        const header = Buffer.allocUnsafe(BLOCK_HEADER_SIZE);
        writeBlockHeader(header, 0, dataHeader(this.codec, number, compressed, rawLength, count));
        this.placeDataBlock([header, compressed], BLOCK_HEADER_SIZE + compressed.length, sealed);
        reusable = true;
      } else {
        this.placeStoredBlock(block.subarray(0, this.pos), payload, number, rawLength, sealed);
      }
    }
    // A block handed out as is belongs to the output now; the next block needs a buffer of its own.
    if (!reusable || block.length < BLOCK_HEADER_SIZE + this.blockSize) {
      this.block = Buffer.allocUnsafe(BLOCK_HEADER_SIZE + this.blockSize);
    }
    this.pos = BLOCK_HEADER_SIZE;
    this.count = 0;
  }

  /** Places a block stored uncompressed: its header written in front of the payload, in the same buffer. */
  private placeStoredBlock(
    block: Buffer,
    payload: Buffer,
    number: number,
    rawLength: number,
    sealed: SealedBlock,
  ): void {
    writeBlockHeader(block, 0, dataHeader(CODEC_NONE, number, payload, rawLength, sealed.count));
    this.placeDataBlock([block], block.length, sealed);
  }

  private async placeOldestPending(): Promise<void> {
    const p = this.pending.shift()!;
    const { chunks, length } = await p.done;
    this.placeDataBlock(chunks, length, p.sealed);
  }

  /** Gives a finished data block its offset and its record in the current index block. */
  private placeDataBlock(chunks: Buffer[], length: number, sealed: SealedBlock): void {
    const { count, lastKey, boundary } = sealed;
    const record = { offset: this.offset, length, count, lastKey };
    this.out.push(...chunks);
    this.offset += length;
    this.placedDataBlocks++;
    this.placedEntries += count;
    this.stats.place(sealed.stats);
    if (this.indexes.add(record)) this.sealIndexBlock();
    // Blocks sealed after this one (pending deflates, the block being filled) hold only entries of later
    // cells: a run resumed from here rebuilds them from the inputs, byte for byte.
    if (boundary && this.offset >= this.cutAt && this.firstKey) {
      this.cutAt = this.offset + this.cutEvery;
      this.out.push({
        offset: this.offset,
        entries: this.placedEntries,
        blocks: this.placedDataBlocks,
        firstKey: encodeKeyRecord(this.firstKey),
        lastKey,
        ...this.indexes.state(),
        stats: this.stats.placedStats(),
      });
    }
  }

  private sealIndexBlock(): void {
    const block = this.indexes.seal(this.offset);
    this.out.push(block);
    this.offset += block.length;
  }

  /** The output so far; a consumer done with a chunk once it asks for the next (ObjectStore.write). */
  private *handOut(): Generator<EncodedChunk> {
    yield* this.takeOutput();
    this.compressed.takeBackAll();
  }

  private takeOutput(): EncodedChunk[] {
    const out = this.out;
    this.out = [];
    return out;
  }
}
