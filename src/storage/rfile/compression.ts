/**
 * Block codecs: how a data block's payload is stored (the `codec` byte of its header, codec.ts).
 *
 *   0 none     the payload as is
 *   1 deflate  a raw RFC 1951 stream (node:zlib, level 1), compressed on the thread pool
 *   2 lz4      an LZ4 block with its decompressed length in front (u32 little-endian), lz4-napi
 *   3 zstd     one Zstandard frame (level 1), zstd-napi
 *
 * Node 20's zlib has no zstd, and lz4 is in no core module: both come from native packages (Node-API, so
 * one binary serves every Node version), chosen by measurement on 64 KiB blocks of the benchmark's data
 * (bench/README.md, "codecs"). lz4-napi has prebuilt binaries on the npm registry. zstd-napi compiles
 * the zstd library at install time (python3, make, g++, as better-sqlite3 does; scripts/setup.mjs), and
 * is used through its low-level binding: one compression and one decompression context per thread,
 * reused for every block, and a block decoded straight into a buffer of the length its header gives.
 * That is 1.7× the compression and 1.8× the decompression speed of @toondepauw/node-zstd, which made a
 * streaming context for every block. On the benchmark's blocks (bench/codecs.ts), zstd level 1 stores
 * 0.52× the bytes at ~340 MB of input per CPU-second and decodes at ~1,570; deflate level 1 stores 0.54×
 * at ~62 and decodes at ~170; lz4 stores 0.85× at ~170 and decodes at ~2,700.
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
/** The part of zstd-napi's low-level binding (zstd-napi/binding: ZSTD_* calls, one context each) we use. */
interface ZstdBinding {
  CCtx: new () => { compress(dst: Uint8Array, src: Uint8Array, level: number): number };
  DCtx: new () => { decompress(dst: Uint8Array, src: Uint8Array): number };
  compressBound(size: number): number;
  getFrameContentSize(frame: Uint8Array): number | null;
}

/** Blocks up to this bound are compressed into the kept scratch buffer; larger ones into their own. */
const SCRATCH_LIMIT = 4 << 20;

const require = createRequire(import.meta.url);
let lz4: Lz4Binding | undefined;
let zstd: ZstdCodec | undefined;

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

/**
 * One compression and one decompression context per thread (module state is per thread), reused for
 * every block, and one scratch buffer that compressed frames are written into before they are copied out
 * at their exact length (a frame is a fraction of its bound, and a block may be kept for a while). The
 * scratch buffer is kept only for blocks of ordinary size: one huge block does not pin its size for good.
 */
class ZstdCodec {
  private readonly cctx;
  private readonly dctx;
  private scratch = Buffer.alloc(0);

  constructor(private readonly binding: ZstdBinding) {
    this.cctx = new binding.CCtx();
    this.dctx = new binding.DCtx();
  }

  compress(payload: Buffer, into?: (bound: number) => Buffer): Buffer {
    const bound = this.binding.compressBound(payload.length);
    if (into) {
      const out = into(bound);
      return out.subarray(0, this.cctx.compress(out, payload, ZSTD_LEVEL));
    }
    if (bound > SCRATCH_LIMIT) {
      const out = Buffer.allocUnsafe(bound);
      return out.subarray(0, this.cctx.compress(out, payload, ZSTD_LEVEL));
    }
    if (this.scratch.length < bound) this.scratch = Buffer.allocUnsafe(SCRATCH_LIMIT);
    const n = this.cctx.compress(this.scratch, payload, ZSTD_LEVEL);
    return Buffer.from(this.scratch.subarray(0, n));
  }

  /**
   * Decodes into exactly `rawLength` bytes: a frame that holds more fails (zstd: destination too small).
   * A frame that says it holds another length is refused before anything is allocated (frames written
   * by the binding before carry no length, and are bounded by the header's).
   */
  decompress(payload: Buffer, rawLength: number, alloc: (size: number) => Buffer): Buffer {
    const declared = this.binding.getFrameContentSize(payload);
    if (declared !== null && declared !== rawLength) {
      throw new FormatError(`zstd frame holds ${declared} bytes, expected ${rawLength}`);
    }
    const raw = alloc(rawLength);
    const n = this.dctx.decompress(raw, payload);
    return n === rawLength ? raw : raw.subarray(0, n);
  }
}

function zstdCodec(): ZstdCodec {
  return (zstd ??= new ZstdCodec(load<ZstdBinding>('zstd-napi/binding')));
}

/**
 * Compresses a block payload. Synchronous for lz4 and zstd (see the module comment); deflate returns a
 * promise (thread pool). The caller stores the payload uncompressed when the result is not smaller.
 * `into` gives the buffer (of at least the codec's bound) that zstd compresses into, the result a view
 * of it: the writer's, reused block after block. Without it, or for lz4, the result is a buffer of its own.
 */
export function compressSync(codec: number, payload: Buffer, into?: (bound: number) => Buffer): Buffer {
  switch (codec) {
    case CODEC_LZ4:
      return lz4Binding().compressSync(payload);
    case CODEC_ZSTD:
      return zstdCodec().compress(payload, into);
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
 * block. Never more than `rawLength` bytes are produced: deflate's output is capped, lz4's length is
 * checked first, and zstd decodes into a buffer of exactly that length.
 */
export async function decompressBlock(codec: number, payload: Buffer, rawLength: number): Promise<Buffer> {
  if (codec !== CODEC_DEFLATE) return decompressBlockSync(codec, payload, rawLength);
  let raw: Buffer;
  try {
    // maxOutputLength: damage can never make us inflate more than the header promised. chunkSize: one
    // pass on the thread pool instead of one per 16 KiB (the default), which doubled the cost.
    const size = Math.max(64, rawLength);
    raw = await inflateRaw(payload, { maxOutputLength: size, chunkSize: size });
  } catch (err) {
    throw decompressError(codec, err);
  }
  return checkedLength(codec, raw, rawLength);
}

/**
 * {@link decompressBlock} for the codecs that run on the calling thread (all but deflate). `alloc` gives
 * the buffer a zstd block is decoded into (a pool's, native-merge.ts), of exactly the size asked.
 */
export function decompressBlockSync(
  codec: number,
  payload: Buffer,
  rawLength: number,
  alloc: (size: number) => Buffer = (size) => Buffer.allocUnsafe(size),
): Buffer {
  let raw: Buffer;
  try {
    switch (codec) {
      case CODEC_NONE:
        return payload;
      case CODEC_LZ4:
        if (payload.length < 4 || payload.readUInt32LE(0) !== rawLength) {
          throw new FormatError(`lz4 block does not announce ${rawLength} bytes`);
        }
        raw = lz4Binding().uncompressSync(payload);
        break;
      case CODEC_ZSTD:
        raw = zstdCodec().decompress(payload, rawLength, alloc);
        break;
      default:
        throw new FormatError(`unknown codec ${codec}`);
    }
  } catch (err) {
    throw decompressError(codec, err);
  }
  return checkedLength(codec, raw, rawLength);
}

function decompressError(codec: number, err: unknown): Error {
  if (err instanceof FormatError || err instanceof ExcError) return err;
  // zlib's word for deflate, as messages have always said.
  const verb = codec === CODEC_DEFLATE ? 'inflate' : `decompress ${nameOf(codec)}`;
  return new FormatError(`cannot ${verb}: ${(err as Error).message}`);
}

function checkedLength(codec: number, raw: Buffer, rawLength: number): Buffer {
  if (raw.length !== rawLength) {
    const what = codec === CODEC_DEFLATE ? 'inflates' : `decompresses (${nameOf(codec)})`;
    throw new FormatError(`${what} to ${raw.length} bytes, expected ${rawLength}`);
  }
  return raw;
}

function nameOf(codec: number): string {
  return COMPRESSIONS.find((c) => CODECS[c] === codec) ?? `codec ${codec}`;
}
