/**
 * The block codecs alone, through the functions the writer and the reader call
 * (src/storage/rfile/compression.ts): what bench/codecs.ts prints per codec, and the baseline beside
 * bench/merge.ts's compaction figures (the least CPU a compaction in that codec can cost on this machine:
 * compressing its output's blocks and decompressing its inputs').
 */
import { BLOCK_HEADER_SIZE, CODEC_DEFLATE, CODEC_NONE, KIND_DATA } from '../src/storage/rfile/codec.js';
import { compressSync, decompressBlock, deflateBlock } from '../src/storage/rfile/compression.js';

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
  /** Stored bytes against raw. */
  sizeVsRaw: number;
  /** CPU-seconds to compress, and to decompress, every block once (the best of the rounds). */
  compressCpuS: number;
  decompressCpuS: number;
  rawBytes: number;
}

/** Compresses and decompresses every block `rounds` times with `codec` (a header byte, codec.ts). */
export async function measureCodec(
  codec: number,
  blocks: readonly Buffer[],
  rounds: number,
): Promise<CodecCpu> {
  const rawBytes = blocks.reduce((n, b) => n + b.length, 0);
  const compress = async (b: Buffer) =>
    codec === CODEC_NONE
      ? Buffer.from(b)
      : codec === CODEC_DEFLATE
        ? deflateBlock(b)
        : compressSync(codec, b);
  let stored: Buffer[] = [];
  let best = { compress: Infinity, decompress: Infinity };
  for (let r = 0; r < rounds; r++) {
    const c = await cpuSeconds(async () => {
      stored = [];
      for (const b of blocks) stored.push(await compress(b));
    });
    const d = await cpuSeconds(async () => {
      for (let i = 0; i < stored.length; i++) await decompressBlock(codec, stored[i]!, blocks[i]!.length);
    });
    best = { compress: Math.min(best.compress, c), decompress: Math.min(best.decompress, d) };
  }
  return {
    sizeVsRaw: stored.reduce((n, b) => n + b.length, 0) / rawBytes,
    compressCpuS: best.compress,
    decompressCpuS: best.decompress,
    rawBytes,
  };
}
