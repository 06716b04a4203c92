/**
 * The storage layer: the data plane that compactions and scans run on.
 *
 * - key.ts: the key model and THE key order;
 * - object-store.ts (+ local.ts, s3.ts, memory.ts): where files live, behind one small interface;
 * - rfile/: the sorted file format (grammar in rfile/codec.ts), its streaming writer and reader;
 * - iterators/: k-way merge and the compaction iterator stack (rules in iterators/stack.ts);
 * - parts.ts: checkpointed output (a compaction's file as finished parts, resumable);
 * - compaction.ts: compactFiles and scanFiles, the entry points the compactor and tablet server use.
 */
export * from './key.js';
export * from './range.js';
export * from './names.js';
export * from './batches.js';
export * from './object-store.js';
export * from './open-store.js';
export { LocalObjectStore } from './local.js';
export { MemoryObjectStore } from './memory.js';
export { S3ObjectStore, type S3StoreOptions, type S3RetryOptions } from './s3.js';
export { isTransientS3Error } from './s3-errors.js';
export { writeRFile, writeRFileBatches } from './rfile/write-file.js';
export {
  RFileEncoder,
  copyKey,
  DEFAULT_BLOCK_SIZE,
  DEFAULT_INDEX_BLOCK_SIZE,
  MAX_FAMILIES,
  type FileStats,
  type FileSummary,
  type RFileWriteOptions,
} from './rfile/writer.js';
export {
  COMPRESSIONS,
  DEFAULT_COMPRESSION,
  DEFLATE_LEVEL,
  ZSTD_LEVEL,
  isCompression,
  type Compression,
} from './rfile/compression.js';
export { RFileReader, type ScanOptions } from './rfile/reader.js';
export { verifyRFile, type FileFacts } from './rfile/verify.js';
export { boundsAt, fileProfile, splitRows, type FileProfile } from './split-rows.js';
export { bytesWithin, middleOf, rowSpans, type RowBounds, type RowSpan } from './row-share.js';
export {
  DEFAULT_CHECKPOINT_BYTES,
  DEFAULT_CHECKPOINT_MS,
  isPartName,
  ofOutputBeingWritten,
  partName,
  partOwner,
  type Checkpoint,
  type CheckpointOptions,
  type PartRef,
} from './parts.js';
export { FORMAT_VERSION, MAGIC } from './rfile/codec.js';
export { crc32, crc32Implementation } from './rfile/crc.js';
export { BlockEntry, plainEntry } from './rfile/block-entry.js';
export { BLOCK_ENTRY_OPS, ENTRY_OPS, entryOrder, sameEntryCell, type EntryOps } from './order.js';
export {
  FILTERS,
  MAX_FILTERS,
  compileFilters,
  validateFilters,
  type FilterName,
  type FilterSpec,
} from './iterators/filters.js';
export {
  DEFAULT_VERSIONS,
  compileSettings,
  iteratorSettingsSchema,
  validateIteratorSettings,
  type CompiledSettings,
  type IteratorSettings,
} from './iterators/settings.js';
export { mergeBatches, type MergeStats } from './iterators/merge.js';
export { mergeBlockBatches, type BlockAccept } from './iterators/merge-blocks.js';
export { cellRules, iteratorStack, iteratorStackBatches } from './iterators/stack.js';
export {
  compactFiles,
  scanFiles,
  type CompactFilesArgs,
  type CompactionProgress,
  type CompactionResult,
  type ScanFilesArgs,
} from './compaction.js';
