/**
 * The block codecs alone, through the functions the writer and the reader call
 * (src/storage/rfile/compression.ts): what bench/codecs.ts prints per codec, and the baseline beside
 * bench/merge.ts's compaction figures (the least CPU a compaction in that codec can cost on this machine:
 * compressing its output's blocks and decompressing its inputs').
 */
import { BLOCK_HEADER_SIZE, CODEC_DEFLATE, CODEC_NONE, KIND_DATA } from '../src/storage/rfile/codec.js';
import {
  compressSync,
  decompressBlock,
  decompressBlockSync,
  deflateBlock,
} from '../src/storage/rfile/compression.js';

/** The raw payloads of the data blocks of uncompressed RFiles: blocks follow each other from offset 0. */
export function dataBlocks(files: readonly Buffer[]): Buffer[] {
  const blocks: Buffer[] = [];
  for (const file of files) {
    // Kind at 0, stored length at 8; the index blocks come after the data blocks they cover.
    for (let pos = 0; pos < file.length && file[pos] === KIND_DATA;) {
      const length = file.readUInt32BE(pos + 8);
      blocks.push(file.subarray(pos + BLOCK_HEADER_SIZE, pos + BLOCK_HEADER_SIZE + length));
      pos += BLOCK_HEADER_SIZE + length;
    }
  }
  return blocks;
}

async function cpuSeconds(work: () => Promise<void> | void): Promise<number> {
  const start = process.cpuUsage();
  await work();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

export interface CodecCpu {
  /** Stored bytes against raw, of the blocks compressed. */
  sizeVsRaw: number;
  /** CPU-seconds to compress, and to decompress, every block once (the best of the rounds). */
  compressCpuS: number;
  decompressCpuS: number;
  /** Raw bytes of the blocks compressed. */
  rawBytes: number;
}

/**
 * Compresses `blocks` and decompresses `decoded` (compressed beforehand, untimed) `rounds` times with
 * `codec` (a header byte, codec.ts), through the functions the writer and the reader call. A compaction
 * compresses its output's blocks and decompresses its inputs', which are not the same blocks
 * (bench/README.md, "The codec alone, on the blocks a compaction codes"); by default both are `blocks`.
 * lz4 and zstd work in memory used again block after block, as compactions do (zstd compresses into the
 * writer's buffer and decodes into the merge's pooled ones); deflate, on the thread pool, allocates as
 * the writer and reader do.
 */
export async function measureCodec(
  codec: number,
  blocks: readonly Buffer[],
  rounds: number,
  decoded: readonly Buffer[] = blocks,
): Promise<CodecCpu> {
  const rawBytes = blocks.reduce((n, b) => n + b.length, 0);
  const largest = [...blocks, ...decoded].reduce((n, b) => Math.max(n, b.length), 0);
  // A generous bound for every codec (zstd's is a few hundred bytes over the block's size).
  const scratch = Buffer.allocUnsafe(largest + (largest >> 7) + 1024);
  const into = (bound: number): Buffer => (bound <= scratch.length ? scratch : Buffer.allocUnsafe(bound));
  const raw = Buffer.allocUnsafe(largest);
  const alloc = (size: number): Buffer =>
    size <= raw.length ? raw.subarray(0, size) : Buffer.allocUnsafe(size);
  const compress = async (b: Buffer): Promise<Buffer> =>
    codec === CODEC_NONE
      ? Buffer.from(b)
      : codec === CODEC_DEFLATE
        ? deflateBlock(b)
        : compressSync(codec, b, into);
  const frames: Buffer[] = [];
  for (const b of decoded) frames.push(Buffer.from(await compress(b)));
  let stored = 0;
  let best = { compress: Infinity, decompress: Infinity };
  for (let r = 0; r < rounds; r++) {
    const c = await cpuSeconds(async () => {
      stored = 0;
      for (const b of blocks) stored += (await compress(b)).length;
    });
    const d = await cpuSeconds(async () => {
      for (let i = 0; i < frames.length; i++) {
        if (codec === CODEC_DEFLATE) await decompressBlock(codec, frames[i]!, decoded[i]!.length);
        else decompressBlockSync(codec, frames[i]!, decoded[i]!.length, alloc);
      }
    });
    best = { compress: Math.min(best.compress, c), decompress: Math.min(best.decompress, d) };
  }
  return {
    sizeVsRaw: stored / rawBytes,
    compressCpuS: best.compress,
    decompressCpuS: best.decompress,
    rawBytes,
  };
}
