/**
 * The writer's types (writer.ts): its options, what it returns, and what it takes besides entries: data
 * blocks assembled by the native merge (native-merge.ts).
 */
import type { BatchSource } from '../batches.js';
import type { Key } from '../key.js';
import type { Compression } from './compression.js';
import type { EncoderState } from './encoder-state.js';
import type { AssembledStats, BlockStats, FileStats } from './file-stats.js';

export { MAX_FAMILIES, type FileStats } from './file-stats.js';

/** What {@link RFileEncoder.encodeMarked} yields: bytes of the file, and the checkpoints asked for. */
export type EncodedChunk = Buffer | EncoderState;

export interface RFileWriteOptions {
  /** Target uncompressed size of a data block. Default 64 KiB. A single larger entry gets a block of its own. */
  blockSize?: number;
  /** Target size of an index block. Default 64 KiB (about 1,500 data blocks, ~100 MB of data). */
  indexBlockSize?: number;
  /**
   * Default {@link DEFAULT_COMPRESSION} (zstd). With any codec, a block that does not shrink is stored
   * uncompressed.
   */
  compression?: Compression;
  signal?: AbortSignal;
  /** Go on from a checkpoint (encoder-state.ts): the file's first `resume.offset` bytes exist elsewhere. */
  resume?: EncoderState;
}

export interface FileSummary {
  entries: number;
  /** Bytes. */
  size: number;
  firstKey: Key | null;
  lastKey: Key | null;
  /** Data blocks. */
  blocks: number;
  /** Absent when the file has no entries, or when it was resumed from a checkpoint that did not record them (written by an older version). */
  stats?: FileStats;
}

export const DEFAULT_BLOCK_SIZE = 64 * 1024;
export const DEFAULT_INDEX_BLOCK_SIZE = 64 * 1024;

/**
 * A data block's entries assembled elsewhere (the native merge), in `block` from BLOCK_HEADER_SIZE to
 * `pos`, with their figures (AssembledStats: delete markers, timestamps, bytes, families).
 */
export interface AssembledBlock extends AssembledStats {
  block: Buffer;
  pos: number;
  count: number;
  /** Where the block's last entry lies in `block`. */
  lastStart: number;
  lastEnd: number;
  /** Its last entry ends a cell (a checkpoint may follow the block). */
  boundary: boolean;
  /** The file's last data block. */
  final: boolean;
}

/**
 * What the encoder takes instead of entries: whole data blocks, and `spare`, where the encoder leaves a
 * buffer of at least BLOCK_HEADER_SIZE + blockSize bytes for the next block once it has sealed one.
 */
export interface BlockFeed {
  readonly kind: 'blocks';
  blocks: AsyncIterable<AssembledBlock>;
  spare: Buffer | null;
}

export function isBlockFeed(source: BatchSource | BlockFeed): source is BlockFeed {
  return (source as BlockFeed).kind === 'blocks';
}

/** What the index, a checkpoint and the file's stats need of a sealed data block, besides its bytes. */
export interface SealedBlock {
  count: number;
  /** Encoded (KeyRecord). */
  lastKey: Buffer;
  /** Its last entry ends a cell (a checkpoint may follow the block). */
  boundary: boolean;
  /** Of its entries: added to the file's once the block is placed (file-stats.ts). */
  stats: BlockStats;
}

/** A data block being compressed on the thread pool, placed once done, in order. */
export interface PendingBlock {
  done: Promise<{ chunks: Buffer[]; length: number }>;
  sealed: SealedBlock;
}
