/**
 * The index of a file being written (writer.ts): the records of its data blocks gathered into index
 * blocks, and the root (one record per index block) that goes in the footer. Format in codec.ts.
 */
import {
  BLOCK_HEADER_SIZE,
  CODEC_NONE,
  crc32,
  indexRecordSize,
  KIND_INDEX,
  writeBlockHeader,
  writeIndexRecord,
  type EncodedIndexRecord,
} from './codec.js';
import type { EncoderState } from './encoder-state.js';
import { grow } from './encoder-util.js';

/** The first index buffer is this small and grows as needed: most files have a handful of blocks. */
const FIRST_BUFFER = 4 * 1024;

export type IndexState = Pick<EncoderState, 'index' | 'indexCount' | 'indexLastKey' | 'root'>;

export class IndexBlocks {
  /** The index block being filled: header space, then its records. */
  private block: Buffer;
  private pos = BLOCK_HEADER_SIZE;
  /** Records in the block being filled, and the last key of its last one. */
  count = 0;
  private lastKey: Buffer | null = null;
  /** The records of the index blocks already sealed. */
  readonly root: EncodedIndexRecord[] = [];

  constructor(
    /** Target payload size of an index block. */
    private readonly blockSize: number,
    from?: IndexState,
  ) {
    if (!from) {
      this.block = Buffer.allocUnsafe(FIRST_BUFFER);
      return;
    }
    this.block = Buffer.allocUnsafe(BLOCK_HEADER_SIZE + Math.max(from.index.length, blockSize) + 1024);
    this.pos = BLOCK_HEADER_SIZE + from.index.copy(this.block, BLOCK_HEADER_SIZE);
    this.count = from.indexCount;
    this.lastKey = from.indexLastKey;
    this.root.push(...from.root);
  }

  /** Adds a data block's record; true when the index block being filled is full and should be sealed. */
  add(record: EncodedIndexRecord): boolean {
    const size = indexRecordSize(record);
    if (this.pos + size > this.block.length) this.block = grow(this.block, this.pos, this.pos + size);
    this.pos = writeIndexRecord(this.block, this.pos, record);
    this.count++;
    this.lastKey = record.lastKey;
    return this.pos - BLOCK_HEADER_SIZE >= this.blockSize;
  }

  /** Seals the index block being filled, to be written at `offset` of the file; returns its bytes. */
  seal(offset: number): Buffer {
    const rawLength = this.pos - BLOCK_HEADER_SIZE;
    writeBlockHeader(this.block, 0, {
      kind: KIND_INDEX,
      codec: CODEC_NONE,
      number: this.root.length,
      storedLength: rawLength,
      rawLength,
      count: this.count,
      payloadCrc: crc32(this.block.subarray(BLOCK_HEADER_SIZE, this.pos)),
    });
    this.root.push({ offset, length: this.pos, count: this.count, lastKey: this.lastKey! });
    const sealed = this.block.subarray(0, this.pos);
    this.block = Buffer.allocUnsafe(BLOCK_HEADER_SIZE + this.blockSize + 1024);
    this.pos = BLOCK_HEADER_SIZE;
    this.count = 0;
    return sealed;
  }

  /** A copy of the index so far, for a checkpoint (encoder-state.ts). */
  state(): IndexState {
    return {
      index: Buffer.from(this.block.subarray(BLOCK_HEADER_SIZE, this.pos)),
      indexCount: this.count,
      indexLastKey: this.lastKey,
      root: [...this.root],
    };
  }
}
