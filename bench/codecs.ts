/**
 * The block codecs alone: each codec's size, compression and decompression speed on the data blocks of
 * the merge benchmark's data set (bench/merge-data.ts), through the functions the writer and the reader
 * call (src/storage/rfile/compression.ts). CPU time of this process, best of R rounds; MB are the raw
 * block bytes. The figure to compare between runs is each codec's speed beside `none`'s copy of the same
 * bytes, measured in the same run.
 *
 *   npx tsx bench/codecs.ts [--entries N] [--rounds R] [--json]
 */
import { parseArgs } from 'node:util';
import { MemoryObjectStore } from '../src/storage/index.js';
import {
  BLOCK_HEADER_SIZE,
  CODEC_DEFLATE,
  CODEC_LZ4,
  CODEC_NONE,
  CODEC_ZSTD,
  KIND_DATA,
} from '../src/storage/rfile/codec.js';
import { compressSync, decompressBlock, deflateBlock } from '../src/storage/rfile/compression.js';
import { fileName, writeDataSet } from './merge-data.js';

const { values: flags } = parseArgs({
  options: {
    entries: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
});

/** The raw payloads of the data blocks of one uncompressed file of the data set (64 KiB blocks). */
async function rawBlocks(entries: number): Promise<Buffer[]> {
  const store = new MemoryObjectStore();
  await writeDataSet(store, { files: 1, entries, valueBytes: 100, compression: 'none' });
  const file = store.bytes(fileName(0));
  const blocks: Buffer[] = [];
  // Blocks follow each other from 0: kind at 0, stored length at 8; the index blocks come last.
  for (let pos = 0; file[pos] === KIND_DATA;) {
    const length = file.readUInt32BE(pos + 8);
    blocks.push(file.subarray(pos + BLOCK_HEADER_SIZE, pos + BLOCK_HEADER_SIZE + length));
    pos += BLOCK_HEADER_SIZE + length;
  }
  return blocks;
}

async function cpuSeconds(work: () => Promise<void> | void): Promise<number> {
  const start = process.cpuUsage();
  await work();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

interface CodecFigures {
  codec: string;
  sizeVsRaw: number;
  compressMbPerCpuS: number;
  decompressMbPerCpuS: number;
}

async function measure(name: string, codec: number, blocks: Buffer[], rounds: number): Promise<CodecFigures> {
  const raw = blocks.reduce((n, b) => n + b.length, 0);
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
    codec: name,
    sizeVsRaw: stored.reduce((n, b) => n + b.length, 0) / raw,
    compressMbPerCpuS: raw / 1e6 / best.compress,
    decompressMbPerCpuS: raw / 1e6 / best.decompress,
  };
}

const blocks = await rawBlocks(Number(flags.entries));
const rounds = Number(flags.rounds);
const figures: CodecFigures[] = [];
for (const [name, codec] of [
  ['none (a copy)', CODEC_NONE],
  ['deflate', CODEC_DEFLATE],
  ['lz4', CODEC_LZ4],
  ['zstd', CODEC_ZSTD],
] as const) {
  figures.push(await measure(name, codec, blocks, rounds));
}
const rawMb = blocks.reduce((n, b) => n + b.length, 0) / 1e6;
if (flags.json) {
  console.log(JSON.stringify({ blocks: blocks.length, rawMb, rounds, figures }));
} else {
  console.log(`${blocks.length} data blocks, ${rawMb.toFixed(1)} MB raw; CPU time, best of ${rounds}`);
  console.log('codec            size   compress MB/CPU-s   decompress MB/CPU-s');
  for (const f of figures) {
    console.log(
      `${f.codec.padEnd(15)} ${f.sizeVsRaw.toFixed(2).padStart(5)}× ${f.compressMbPerCpuS.toFixed(0).padStart(10)} ${f.decompressMbPerCpuS.toFixed(0).padStart(21)}`,
    );
  }
}
