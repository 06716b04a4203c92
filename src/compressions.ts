/**
 * The names of the block codecs (storage/rfile/compression.ts implements them): a leaf module, so that
 * a table's settings can be checked — by the manager, the command line — without loading the storage
 * layer.
 */
export const COMPRESSIONS = ['none', 'deflate', 'lz4', 'zstd'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

/** The codec of new files unless a table says otherwise: the one the merge benchmark found best. */
export const DEFAULT_COMPRESSION: Compression = 'zstd';

export function isCompression(value: unknown): value is Compression {
  return typeof value === 'string' && (COMPRESSIONS as readonly string[]).includes(value);
}
