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
import { CODEC_DEFLATE, CODEC_LZ4, CODEC_NONE, CODEC_ZSTD } from '../src/storage/rfile/codec.js';
import { dataBlocks, measureCodec } from './codec-measure.js';
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
  return dataBlocks([store.bytes(fileName(0))]);
}

interface CodecFigures {
  codec: string;
  sizeVsRaw: number;
  compressMbPerCpuS: number;
  decompressMbPerCpuS: number;
}

async function measure(name: string, codec: number, blocks: Buffer[], rounds: number): Promise<CodecFigures> {
  const m = await measureCodec(codec, blocks, rounds);
  return {
    codec: name,
    sizeVsRaw: m.sizeVsRaw,
    compressMbPerCpuS: m.rawBytes / 1e6 / m.compressCpuS,
    decompressMbPerCpuS: m.rawBytes / 1e6 / m.decompressCpuS,
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
