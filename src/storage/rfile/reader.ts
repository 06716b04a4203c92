/**
 * The RFile reader (format in codec.ts).
 *
 * `open` reads the footer (one ranged read of the file's tail) and keeps the root index. A scan seeks
 * with the root and one index block, then streams the blocks it needs with a single streaming read —
 * one request per file and scan on S3, where the latency of a request per block would dominate — and
 * parses them as they arrive, inflating deflated blocks a couple of blocks ahead on the thread pool.
 * Every block passed is verified: header checksum, kind and number (the block expected at that place),
 * payload checksum, and a decode that must consume exactly its bytes. Any violation is CORRUPT_FILE
 * naming the file and the block; nothing is ever returned from a block that failed a check. Memory: the
 * stream's chunks in flight plus a few decoded blocks.
 */
import { ExcError } from '../../errors.js';
import { compareKeys, type Entry } from '../key.js';
import type { ObjectStore } from '../object-store.js';
import { rangeIsEmpty, rowAfterStart, rowBeforeEnd, type RowRange } from '../range.js';
import { plainEntry, type BlockEntry } from './block-entry.js';
import { copyInto, readChunkPool } from './buffer-pool.js';
import { ByteQueue } from './byte-queue.js';
import {
  BLOCK_HEADER_SIZE,
  ByteReader,
  CODEC_DEFLATE,
  CODEC_NONE,
  crc32,
  FOOTER_TAIL_SIZE,
  FormatError,
  KIND_DATA,
  KIND_INDEX,
  MIN_DATA_BLOCK,
  MIN_INDEX_RECORD,
  readBlockHeader,
  readFooterBody,
  readFooterTail,
  readIndexRecord,
  type Footer,
  type IndexRecord,
} from './codec.js';
import { corruptFile } from './corrupt.js';
import {
  BlockCursor,
  checkFooter,
  decodeBlock,
  decompressStored,
  decompressStoredSync,
  describe,
  type RootEntry,
  type ScanStart,
  type StoredBlock,
} from './blocks.js';
import { copyKey, type FileSummary } from './writer.js';

/** How much of the tail `open` reads at once: the footer of any but a huge file. */
const OPEN_READ = 64 * 1024;

/**
 * Deflated data blocks inflated ahead of the one being consumed (on the thread pool, meanwhile). Blocks
 * of the other codecs are decoded on this thread when asked for: decoding them ahead gained nothing and
 * kept more entries in memory, which cost the merge about 10% in cache misses and garbage collection.
 */
const DECODE_AHEAD = 2;

/** A data block decompressed, not decoded (RFileReader.rawBlocks). */
export interface RawBlock {
  payload: Buffer;
  count: number;
  /** CORRUPT_FILE naming the file and this block. */
  corrupt(detail: string): ExcError;
}

export interface ScanOptions {
  signal?: AbortSignal;
}

export interface RawBlockOptions extends ScanOptions {
  /**
   * Memory for the blocks handed out: a buffer of exactly the size asked for (a pool's, native-merge.ts).
   * With it, zstd blocks are decompressed into it, blocks stored uncompressed are copied into it, and
   * the file is read into chunks the scan uses again (so no block handed out is a view of one).
   * Without it, fresh buffers.
   */
  alloc?: (size: number) => Buffer;
}

export class RFileReader {
  /** Bytes fetched from the store so far, by `open` and by scans (for progress reports). */
  bytesRead = 0;

  private constructor(
    readonly store: ObjectStore,
    readonly name: string,
    /**
     * How messages name the file: its key within the store, never the store's URL (a local store's URL
     * is an absolute path on the server, which an error answer must not show).
     */
    readonly file: string,
    readonly summary: FileSummary,
    private readonly root: RootEntry[],
    private readonly footerStart: number,
  ) {}

  /** Opens a file: OBJECT_NOT_FOUND when missing, CORRUPT_FILE when its footer is damaged or not an RFile's. */
  static async open(store: ObjectStore, name: string, options: ScanOptions = {}): Promise<RFileReader> {
    const file = name;
    const info = await store.stat(name);
    if (!info) throw new ExcError('OBJECT_NOT_FOUND', `no RFile ${file}`, { details: { name, file } });
    const size = info.size;
    if (size < FOOTER_TAIL_SIZE) throw corruptFile(file, null, `${size} bytes: too short to be an RFile`);
    const tailLength = Math.min(size, OPEN_READ);
    const tail = await store.readRange(name, size - tailLength, tailLength, options);
    if (tail.length !== tailLength) {
      throw corruptFile(
        file,
        null,
        `read ${tail.length} of its last ${tailLength} bytes: truncated while reading?`,
      );
    }
    let footer: Footer;
    let bodyLength: number;
    try {
      const t = readFooterTail(tail.subarray(tailLength - FOOTER_TAIL_SIZE));
      bodyLength = t.bodyLength;
      if (bodyLength > size - FOOTER_TAIL_SIZE) {
        throw new FormatError(`footer length ${bodyLength} exceeds the file (${size} bytes)`);
      }
      let body: Buffer;
      if (bodyLength <= tailLength - FOOTER_TAIL_SIZE) {
        body = tail.subarray(tailLength - FOOTER_TAIL_SIZE - bodyLength, tailLength - FOOTER_TAIL_SIZE);
      } else {
        body = await store.readRange(name, size - FOOTER_TAIL_SIZE - bodyLength, bodyLength, options);
        if (body.length !== bodyLength) throw new FormatError('footer truncated while reading');
      }
      if (crc32(body) !== t.bodyCrc) throw new FormatError('footer checksum mismatch');
      footer = readFooterBody(body);
    } catch (err) {
      if (err instanceof FormatError) throw corruptFile(file, 'footer', err.message, err);
      throw err;
    }
    const footerStart = size - FOOTER_TAIL_SIZE - bodyLength;
    const root = checkFooter(file, footer, footerStart);
    const opened = tailLength + (bodyLength > tailLength - FOOTER_TAIL_SIZE ? bodyLength : 0);
    // Copies: views would keep the whole 64 KiB tail alive for as long as the reader.
    const summary: FileSummary = {
      entries: footer.entryCount,
      size,
      firstKey: footer.firstKey && copyKey(footer.firstKey),
      lastKey: footer.lastKey && copyKey(footer.lastKey),
      blocks: footer.dataBlocks,
    };
    for (const r of root) r.lastKey = copyKey(r.lastKey);
    const reader = new RFileReader(store, name, file, summary, root, footerStart);
    reader.bytesRead = opened;
    return reader;
  }

  /** The entries in `range` (default: all), in order, as plain `{ key, value }` objects. */
  async *scan(range: RowRange = {}, options: ScanOptions = {}): AsyncGenerator<Entry> {
    for await (const batch of this.scanBatches(range, options)) {
      for (const e of batch) yield plainEntry(e);
    }
  }

  /** The entries in `range`, a data block at a time, undecoded fields (for the merge and the writer). */
  async *scanBatches(range: RowRange = {}, options: ScanOptions = {}): AsyncGenerator<BlockEntry[]> {
    if (this.root.length === 0 || rangeIsEmpty(range)) return;
    let checkStart = range.startRow !== undefined;
    const checkEnd = range.endRow !== undefined;
    for await (let batch of this.decodedBlocks(range, options.signal)) {
      if (checkStart) {
        let i = 0;
        while (i < batch.length && !rowAfterStart(batch[i]!.key.row, range)) i++;
        if (i > 0) batch = batch.slice(i);
        checkStart = batch.length === 0;
      }
      if (checkEnd && batch.length > 0 && !rowBeforeEnd(batch[batch.length - 1]!.key.row, range)) {
        let i = 0;
        while (i < batch.length && rowBeforeEnd(batch[i]!.key.row, range)) i++;
        if (i > 0) yield batch.slice(0, i);
        return;
      }
      if (batch.length > 0) yield batch;
    }
  }

  /**
   * The data blocks a scan of `range` needs, decoded, in order. Deflated blocks are inflated on the
   * thread pool up to {@link DECODE_AHEAD} blocks ahead, while the caller merges the current one.
   */
  private async *decodedBlocks(range: RowRange, signal?: AbortSignal): AsyncGenerator<BlockEntry[]> {
    const pending: Promise<BlockEntry[]>[] = [];
    try {
      for await (const block of this.verifiedBlocks(range, signal)) {
        const decoded = decodeBlock(this.file, block);
        // Handled from the start: a block decoded ahead may fail while this generator waits for its
        // consumer, long before it is awaited (an unhandled rejection ends the process). Awaiting it
        // below still throws its error.
        decoded.catch(() => undefined);
        pending.push(decoded);
        const ahead = block.header.codec === CODEC_DEFLATE ? DECODE_AHEAD : 0;
        if (pending.length > ahead) yield await pending.shift()!;
      }
      while (pending.length > 0) yield await pending.shift()!;
    } finally {
      // Blocks decoded ahead of a scan that stopped early (or failed) are dropped, their errors with them.
      for (const p of pending) p.catch(() => undefined);
    }
  }

  /**
   * The data blocks a scan of `range` needs, decompressed but not decoded, in order (the native merge
   * decodes them itself): whole blocks, so entries outside `range` at either end are the caller's to
   * skip. `corrupt` makes the error that names the block, for damage found when decoding it.
   */
  async *rawBlocks(range: RowRange = {}, options: RawBlockOptions = {}): AsyncGenerator<RawBlock> {
    if (this.root.length === 0 || rangeIsEmpty(range)) return;
    const { alloc } = options;
    // With `alloc`, the file is read into chunks used again (verifiedBlocks), so no block handed out may
    // be a view of one: a block stored uncompressed is copied into `alloc`'s memory, and a deflated one
    // is copied before the thread pool inflates it (this generator reads on meanwhile).
    const reuse = alloc !== undefined;
    const pending: Promise<RawBlock>[] = [];
    const raw = (block: StoredBlock, payload: Buffer): RawBlock => ({
      payload,
      count: block.header.count,
      corrupt: (detail) =>
        corruptFile(this.file, describe(KIND_DATA, block.header.number, block.offset), detail),
    });
    try {
      for await (const block of this.verifiedBlocks(range, options.signal, reuse)) {
        if (block.header.codec !== CODEC_DEFLATE && pending.length === 0) {
          // The codecs that run on this thread: no promise per block.
          const payload =
            reuse && block.header.codec === CODEC_NONE
              ? copyInto(alloc(block.payload.length), block.payload)
              : decompressStoredSync(this.file, block, alloc);
          yield raw(block, payload);
          continue;
        }
        const stored = reuse ? { ...block, payload: Buffer.from(block.payload) } : block;
        const decoded = decompressStored(this.file, stored).then((payload) => raw(block, payload));
        // As in decodedBlocks: handled from the start, still thrown when awaited.
        decoded.catch(() => undefined);
        pending.push(decoded);
        const ahead = block.header.codec === CODEC_DEFLATE ? DECODE_AHEAD : 0;
        if (pending.length > ahead) yield await pending.shift()!;
      }
      while (pending.length > 0) yield await pending.shift()!;
    } finally {
      for (const p of pending) p.catch(() => undefined);
    }
  }

  /** The data blocks of a scan as stored, each checked (header, place in the file, payload checksum). */
  private async *verifiedBlocks(
    range: RowRange,
    signal?: AbortSignal,
    reuse = false,
  ): AsyncGenerator<StoredBlock> {
    const start = await this.seek(range, signal);
    if (start === null) return;
    const end = this.scanEnd(range);
    const blocks = new BlockCursor(this.file, this.root, start);
    // With `reuse`, the caller is done with a block when it asks for the next: the chunks the queue has
    // given out entirely are read into again (BufferPool), and a block spanning chunks is gathered into
    // the same buffer each time (ByteQueue).
    const queue = new ByteQueue(reuse);
    const chunks = reuse ? readChunkPool() : null;
    const release = (): void => {
      for (const chunk of queue.dropped) chunks!.give(chunk);
      queue.dropped.length = 0;
    };
    for await (const chunk of this.store.readStream(this.name, {
      offset: start.offset,
      length: end - start.offset,
      signal,
      ...(chunks ? { alloc: chunks.take } : {}),
    })) {
      if (chunks) release();
      this.bytesRead += chunk.length;
      queue.push(chunk);
      while (queue.length >= BLOCK_HEADER_SIZE) {
        const header = blocks.header(queue.peek(BLOCK_HEADER_SIZE));
        const total = BLOCK_HEADER_SIZE + header.storedLength;
        if (blocks.offset + total > end) {
          throw blocks.corrupt(`length ${total} runs past the end of the blocks (offset ${end})`);
        }
        if (queue.length < total) break;
        const payload = queue.take(total).subarray(BLOCK_HEADER_SIZE);
        if (crc32(payload) !== header.payloadCrc) throw blocks.corrupt('payload checksum mismatch');
        const offset = blocks.offset;
        blocks.next(total);
        if (header.kind === KIND_DATA) {
          yield { header, payload, offset };
          if (chunks) release();
        }
      }
    }
    if (queue.length > 0 || blocks.offset !== end) {
      throw blocks.corrupt(`the file ends early (at offset ${blocks.offset + queue.length})`);
    }
  }

  /**
   * The last row of every data block and the offset where the block ends, in file order: every index
   * block read (about a thousandth of the file). For choosing where to split a job by its inputs' bytes.
   */
  async blockEnds(options: ScanOptions = {}): Promise<{ row: Buffer; end: number }[]> {
    const out: { row: Buffer; end: number }[] = [];
    for (let j = 0; j < this.root.length; j++) {
      for (const rec of await this.readIndexBlock(j, options.signal))
        out.push({ row: Buffer.from(rec.lastKey.row), end: rec.offset + rec.length });
    }
    return out;
  }

  /** Where a scan of `range` starts: the first data block that may hold a row of it. */
  private async seek(range: RowRange, signal?: AbortSignal): Promise<ScanStart | null> {
    if (range.startRow === undefined) return { offset: 0, dataBlock: 0, indexBlock: 0 };
    const j = firstIndex(this.root, (r) => rowAfterStart(r.lastKey.row, range));
    if (j === this.root.length) return null;
    const records = await this.readIndexBlock(j, signal);
    const i = firstIndex(records, (r) => rowAfterStart(r.lastKey.row, range));
    if (i === records.length)
      throw corruptFile(
        this.file,
        describe(KIND_INDEX, j, this.root[j]!.offset),
        'its last key differs from the root',
      );
    return { offset: records[i]!.offset, dataBlock: this.root[j]!.firstDataBlock + i, indexBlock: j };
  }

  /** Where a scan of `range` may stop: after the index block of the first data block past its end. */
  private scanEnd(range: RowRange): number {
    if (range.endRow === undefined) return this.footerStart;
    const j = firstIndex(this.root, (r) => !rowBeforeEnd(r.lastKey.row, range));
    return j === this.root.length ? this.footerStart : this.root[j]!.offset + this.root[j]!.length;
  }

  /** Reads and checks index block `j`: its header, checksum, records, and that they tile its data blocks. */
  private async readIndexBlock(j: number, signal?: AbortSignal): Promise<IndexRecord[]> {
    const entry = this.root[j]!;
    const where = describe(KIND_INDEX, j, entry.offset);
    const bytes = await this.store.readRange(this.name, entry.offset, entry.length, { signal });
    this.bytesRead += bytes.length;
    try {
      if (bytes.length !== entry.length) throw new FormatError('the file ends early');
      const h = readBlockHeader(bytes);
      if (h.kind !== KIND_INDEX || h.number !== j)
        throw new FormatError(`found ${describe(h.kind, h.number, entry.offset)} instead`);
      if (BLOCK_HEADER_SIZE + h.storedLength !== entry.length)
        throw new FormatError('length differs from the root');
      if (h.count !== entry.count) throw new FormatError('record count differs from the root');
      const payload = bytes.subarray(BLOCK_HEADER_SIZE);
      if (crc32(payload) !== h.payloadCrc) throw new FormatError('payload checksum mismatch');
      if (h.count * MIN_INDEX_RECORD > payload.length)
        throw new FormatError(`record count ${h.count} exceeds the block`);
      const r = new ByteReader(payload);
      const records: IndexRecord[] = [];
      let expected = j === 0 ? 0 : this.root[j - 1]!.offset + this.root[j - 1]!.length;
      for (let i = 0; i < h.count; i++) {
        const rec = readIndexRecord(r);
        if (rec.offset !== expected)
          throw new FormatError(`record ${i} points at offset ${rec.offset}, expected ${expected}`);
        if (rec.length < MIN_DATA_BLOCK || rec.count < 1)
          throw new FormatError(`record ${i} describes an impossible block`);
        if (i > 0 && compareKeys(records[i - 1]!.lastKey, rec.lastKey) > 0)
          throw new FormatError(`record ${i} is out of order`);
        expected = rec.offset + rec.length;
        records.push(rec);
      }
      if (r.remaining !== 0) throw new FormatError(`${r.remaining} bytes after the last record`);
      if (expected !== entry.offset) throw new FormatError('its data blocks do not end where it starts');
      if (compareKeys(records[records.length - 1]!.lastKey, entry.lastKey) !== 0) {
        throw new FormatError('its last key differs from the root');
      }
      return records;
    } catch (err) {
      if (err instanceof FormatError) throw corruptFile(this.file, where, err.message, err);
      throw err;
    }
  }
}

/** Index of the first element satisfying a predicate that is false then true along the array. */
function firstIndex<T>(items: readonly T[], pred: (item: T) => boolean): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (pred(items[mid]!)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
