/**
 * Block codecs: how a data block's payload is stored (the `codec` byte of its header, codec.ts).
 *
 *   0 none     the payload as is
 *   1 deflate  a raw RFC 1951 stream (node:zlib, level 1), compressed on the thread pool
 *   2 lz4      an LZ4 block with its decompressed length in front (u32 little-endian), lz4-napi
 *   3 zstd     one Zstandard frame (level 1), @toondepauw/node-zstd
 *
 * Node 20's zlib has no zstd, and lz4 is in no core module: both come from native packages with
 * prebuilt binaries on the npm registry (napi-rs: Node-API, so one binary serves every Node version).
 * They were chosen by measurement on 64 KiB blocks of the benchmark's data (bench/README.md, "codecs"):
 * zstd level 1 stores 0.39× the bytes at ~290 MB of input per CPU-second and decodes at ~790; deflate
 * level 1 stores 0.55× at ~77 and decodes at ~355; lz4 stores 0.83× at ~176 and decodes at ~3,400.
 * The older @mongodb-js/zstd line with prebuilt binaries on the registry compressed at ~160 MB per
 * CPU-second; its current line downloads its binary from elsewhere at install time.
 *
 * lz4 and zstd run synchronously on the calling thread: at these speeds a 64 KiB block takes a fraction
 * of a millisecond, less than a hop to the thread pool and back costs in CPU, and a compactor gets more
 * cores by running more jobs (worker threads), not by spreading one job's blocks.
 *
 * The native modules are loaded on first use, so that processes that never read or write a file (the
 * command line) do not pay for them, and a binding that fails to load is an error naming the package.
 */
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { deflateRaw as deflateRawCallback, inflateRaw as inflateRawCallback } from 'node:zlib';
import { COMPRESSIONS, isCompression, type Compression } from '../../compressions.js';
import { ExcError } from '../../errors.js';
import { CODEC_DEFLATE, CODEC_LZ4, CODEC_NONE, CODEC_ZSTD, FormatError } from './codec.js';

export { COMPRESSIONS, DEFAULT_COMPRESSION, isCompression, type Compression } from '../../compressions.js';

/** zlib level 1: most of the size reduction of level 6 at a fraction of the CPU. */
export const DEFLATE_LEVEL = 1;
/** zstd level 1: smaller than deflate at 6 and faster than lz4 here; level 3 costs ~30% more CPU for nothing. */
export const ZSTD_LEVEL = 1;

const CODECS: Record<Compression, number> = {
  none: CODEC_NONE,
  deflate: CODEC_DEFLATE,
  lz4: CODEC_LZ4,
  zstd: CODEC_ZSTD,
};

/** The header byte of a compression; BAD_REQUEST for an unknown one. */
export function codecOf(compression: unknown): number {
  if (!isCompression(compression)) {
    throw new ExcError(
      'BAD_REQUEST',
      `compression must be one of ${COMPRESSIONS.join(', ')}, got ${JSON.stringify(compression)}`,
    );
  }
  return CODECS[compression];
}

const deflateRaw = promisify(deflateRawCallback);
const inflateRaw = promisify(inflateRawCallback);

interface Lz4Binding {
  compressSync(data: Buffer): Buffer;
  uncompressSync(data: Uint8Array): Buffer;
}
interface ZstdBinding {
  Encoder: new (level: number) => { encodeSync(data: Buffer): Buffer };
  Decoder: new () => { decodeSync(data: Buffer): Buffer };
}

const require = createRequire(import.meta.url);
let lz4: Lz4Binding | undefined;
let zstd:
  | { encoder: { encodeSync(data: Buffer): Buffer }; decoder: { decodeSync(data: Buffer): Buffer } }
  | undefined;

function load<T>(name: string): T {
  try {
    return require(name) as T;
  } catch (err) {
    throw new ExcError(
      'INTERNAL',
      `the native package ${name} does not load (${(err as Error).message}); run npm install (or node scripts/setup.mjs)`,
      { cause: err },
    );
  }
}

function lz4Binding(): Lz4Binding {
  return (lz4 ??= load<Lz4Binding>('lz4-napi'));
}

/** One encoder and decoder per thread: the binding keeps a zstd context in each and reuses it. */
function zstdBinding(): NonNullable<typeof zstd> {
  if (!zstd) {
    const b = load<ZstdBinding>('@toondepauw/node-zstd');
    zstd = { encoder: new b.Encoder(ZSTD_LEVEL), decoder: new b.Decoder() };
  }
  return zstd;
}

/**
 * Compresses a block payload. Synchronous for lz4 and zstd (see the module comment); deflate returns a
 * promise (thread pool). The caller stores the payload uncompressed when the result is not smaller.
 */
export function compressSync(codec: number, payload: Buffer): Buffer {
  switch (codec) {
    case CODEC_LZ4:
      return lz4Binding().compressSync(payload);
    case CODEC_ZSTD:
      return zstdBinding().encoder.encodeSync(payload);
    default:
      throw new ExcError('INTERNAL', `codec ${codec} has no synchronous compressor`);
  }
}

export function deflateBlock(payload: Buffer): Promise<Buffer> {
  // chunkSize: the whole block in one pass on the thread pool (the default 16 KiB takes several).
  return deflateRaw(payload, { level: DEFLATE_LEVEL, chunkSize: Math.max(64, payload.length + 1024) });
}

/**
 * Decompresses a verified payload to exactly `rawLength` bytes; anything else (damage that passed the
 * checksum, a codec's own error) is a FormatError, which the reader reports as CORRUPT_FILE naming the
 * block. Never more than `rawLength` bytes are produced for deflate and lz4 (their length is checked
 * or capped first); zstd frames are bounded by the check after decoding.
 */
export async function decompressBlock(codec: number, payload: Buffer, rawLength: number): Promise<Buffer> {
  let raw: Buffer;
  try {
    switch (codec) {
      case CODEC_NONE:
        return payload;
      case CODEC_DEFLATE: {
        // maxOutputLength: damage can never make us inflate more than the header promised. chunkSize:
        // one pass on the thread pool instead of one per 16 KiB (the default), which doubled the cost.
        const size = Math.max(64, rawLength);
        raw = await inflateRaw(payload, { maxOutputLength: size, chunkSize: size });
        break;
      }
      case CODEC_LZ4:
        if (payload.length < 4 || payload.readUInt32LE(0) !== rawLength) {
          throw new FormatError(`lz4 block does not announce ${rawLength} bytes`);
        }
        raw = lz4Binding().uncompressSync(payload);
        break;
      case CODEC_ZSTD:
        raw = zstdBinding().decoder.decodeSync(payload);
        break;
      default:
        throw new FormatError(`unknown codec ${codec}`);
    }
  } catch (err) {
    if (err instanceof FormatError || err instanceof ExcError) throw err;
    // zlib's word for deflate, as messages have always said.
    const verb = codec === CODEC_DEFLATE ? 'inflate' : `decompress ${nameOf(codec)}`;
    throw new FormatError(`cannot ${verb}: ${(err as Error).message}`);
  }
  if (raw.length !== rawLength) {
    const what = codec === CODEC_DEFLATE ? 'inflates' : `decompresses (${nameOf(codec)})`;
    throw new FormatError(`${what} to ${raw.length} bytes, expected ${rawLength}`);
  }
  return raw;
}

function nameOf(codec: number): string {
  return COMPRESSIONS.find((c) => CODECS[c] === codec) ?? `codec ${codec}`;
}
