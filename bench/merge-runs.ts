/**
 * The runs the merge benchmark times (bench/merge.ts prints them): a merge in memory, compactions and
 * copies through a store, compactions in a child process for their peak memory.
 */
import { spawn } from 'node:child_process';
import {
  BLOCK_ENTRY_OPS,
  compactFiles,
  compileSettings,
  iteratorStackBatches,
  RFileReader,
  type Compression,
  type ObjectStore,
} from '../src/storage/index.js';
import { nativeFeed } from '../src/storage/native-merge.js';
import { DEFAULT_BLOCK_SIZE } from '../src/storage/rfile/writer.js';

export const SETTINGS = { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: true };

/**
 * Merges `inputs` as a compaction does, counting the output; throws unless every entry came out. Native
 * (what compactions run when the binding is built): decoding, merge, rules and the output's data blocks
 * assembled, not compressed or written. JavaScript: through the whole iterator stack, the output batches
 * counted (the writer's copy into blocks left out).
 */
export async function mergeOnly(
  store: ObjectStore,
  inputs: string[],
  expected: number,
  native = false,
): Promise<void> {
  const readers = await Promise.all(inputs.map((name) => RFileReader.open(store, name)));
  let n = 0;
  if (native) {
    const feed = nativeFeed({
      readers,
      readRange: {},
      settings: compileSettings(SETTINGS),
      rows: {},
      after: undefined,
      blockSize: DEFAULT_BLOCK_SIZE,
      stats: { entriesRead: 0 },
      signal: undefined,
    });
    for await (const block of feed.blocks) {
      n += block.count;
      feed.spare = block.block;
    }
    if (n !== expected) throw new Error(`merged ${n} entries, expected ${expected}`);
    return;
  }
  for await (const batch of iteratorStackBatches(
    readers.map((r) => r.scanBatches()),
    compileSettings(SETTINGS),
    { ops: BLOCK_ENTRY_OPS },
  )) {
    n += batch.length;
  }
  if (n !== expected) throw new Error(`merged ${n} entries, expected ${expected}`);
}

async function* concatenated(store: ObjectStore, inputs: string[]): AsyncGenerator<Buffer> {
  for (const name of inputs) yield* store.readStream(name);
}

/** Reads every input and writes their bytes as one object: the I/O a compaction cannot avoid. */
export async function copyThrough(store: ObjectStore, inputs: string[], output: string): Promise<void> {
  await store.write(output, concatenated(store, inputs));
  await store.delete(output);
}

/** One compaction of `inputs` into `output` (deleted afterwards); returns the output's size. */
export async function compactOnce(
  store: ObjectStore,
  inputs: string[],
  output: string,
  compression: Compression,
  expected: number,
): Promise<number> {
  const result = await compactFiles({ store, inputs, output, settings: SETTINGS, compression });
  if (result.entriesWritten !== expected) throw new Error(`wrote ${result.entriesWritten} entries`);
  const size = result.output?.size ?? 0;
  await store.delete(output);
  return size;
}

/**
 * The data blocks of one compaction's output, uncompressed: what a compaction of `inputs` compresses.
 * They are not its inputs' blocks: the output's neighbouring entries come from different files.
 */
export async function compactionOutputBlocks(store: ObjectStore, inputs: string[]): Promise<Buffer[]> {
  const output = 'output/blocks.rf';
  await compactFiles({ store, inputs, output, settings: SETTINGS, compression: 'none' });
  const blocks: Buffer[] = [];
  try {
    const reader = await RFileReader.open(store, output);
    for await (const block of reader.rawBlocks()) blocks.push(Buffer.from(block.payload));
  } finally {
    await store.delete(output);
  }
  return blocks;
}

/** A full scan of one file, undecoded fields (what the merge reads). */
export async function scanOnce(store: ObjectStore, name: string): Promise<void> {
  const reader = await RFileReader.open(store, name);
  for await (const batch of reader.scanBatches()) void batch;
}

export interface ChildResult {
  ms: number;
  cpuMs: number;
  startRss: number | null;
  peakRss: number | null;
  peakHeap: number;
  peakBuffers: number;
  entriesWritten: number;
}

/** One compaction in its own process (bench/merge-child.ts), for its own peak memory. */
export function compactInChild(
  root: string,
  inputs: string[],
  compression: Compression,
  output = 'output/child.rf',
): Promise<ChildResult> {
  const script = new URL('./merge-child.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [...process.execArgv, script, root, output, compression, ...inputs],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
    proc.once('error', reject);
    proc.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`merge-child exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as ChildResult);
    });
  });
}
