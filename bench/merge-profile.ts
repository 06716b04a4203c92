/**
 * Where the in-memory merge's time goes (bench/README.md):
 *
 *   npx tsx bench/merge-profile.ts [--files 10] [--entries 200000] [--codec none] [--profile out.cpuprofile]
 *
 * Writes the merge benchmark's data set into memory, then times the merge's stages by subtraction, each
 * the best of five passes over the same blocks: checksums alone (crc32 of every stored block), the scan
 * (checksums, decompression, decoding into BlockEntry objects with their offset-value codes), the scan
 * plus the loser-tree merge the stack uses for file blocks (mergeBlockBatches, every entry kept), and
 * the whole stack (plus the versioning and delete rules). `--compare` also times mergeBatches, the
 * general merge, over the same blocks with compareBlockEntries: what the offset-value codes save. With --profile, a CPU
 * profile of five whole-stack merges is written (open it in Chrome DevTools) and its self time by
 * function summarised; tsx's transform hides line numbers, not function names.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import {
  BLOCK_ENTRY_OPS,
  compileSettings,
  crc32,
  isCompression,
  mergeBatches,
  mergeBlockBatches,
  MemoryObjectStore,
  RFileReader,
} from '../src/storage/index.js';
import { fileName, writeDataSet } from './merge-data.js';
import { best } from './merge-measure.js';
import { mergeOnly, SETTINGS } from './merge-runs.js';

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '10' },
    entries: { type: 'string', default: '200000' },
    codec: { type: 'string', default: 'none' },
    profile: { type: 'string' },
    compare: { type: 'boolean', default: false },
  },
});
const files = Number(flags.files);
const entries = Number(flags.entries);
const codec = flags.codec;
if (!isCompression(codec)) throw new Error(`unknown codec ${codec}`);
const total = files * entries;

const store = new MemoryObjectStore();
await writeDataSet(store, { files, entries, valueBytes: 100, compression: codec });
const inputs = Array.from({ length: files }, (_, f) => fileName(f));
const open = () => Promise.all(inputs.map((name) => RFileReader.open(store, name)));
const say = (line: string): void => void process.stdout.write(`${line}\n`);

// Checksums alone: one crc32 per stored block, over every byte of the files (what the scan verifies).
const blobs = inputs.map((name) => store.bytes(name));
const checksumMs = await best(5, async () => {
  for (const b of blobs)
    for (let p = 0; p + 65_536 <= b.length; p += 65_536) crc32(b.subarray(p, p + 65_536));
});
const scanMs = await best(5, async () => {
  for (const r of await open()) for await (const batch of r.scanBatches()) void batch;
});
const mergeMs = await best(5, async () => {
  const readers = await open();
  let n = 0;
  for await (const batch of mergeBlockBatches(
    readers.map((r) => r.scanBatches()),
    () => true,
  ))
    n += batch.length;
  if (n !== total) throw new Error(`merged ${n}`);
});
const generalMs = !flags.compare
  ? null
  : await best(5, async () => {
      const readers = await open();
      let n = 0;
      for await (const batch of mergeBatches(
        readers.map((r) => r.scanBatches()),
        () => true,
        { compare: BLOCK_ENTRY_OPS.compare },
      ))
        n += batch.length;
      if (n !== total) throw new Error(`merged ${n}`);
    });
const stackMs = await best(5, () => mergeOnly(store, inputs, total));
void compileSettings(SETTINGS);

const row = (what: string, ms: number): void =>
  say(
    `${what.padEnd(64)} ${ms.toFixed(0).padStart(6)} ms  ${((100 * ms) / stackMs).toFixed(0).padStart(3)}%`,
  );
say(
  `${files} files × ${entries} entries (${codec}); whole stack ${(total / (stackMs / 1000) / 1e6).toFixed(2)} M entries/s`,
);
row('checksums (crc32 of every stored byte)', checksumMs);
row('scan: checksums, decompression, decoding, codes', scanMs);
row('  of which decompression, decoding and codes', scanMs - checksumMs);
row('loser-tree merge (offset-value codes, batching), by subtraction', mergeMs - scanMs);
if (generalMs !== null) row('  the same with mergeBatches (byte comparisons)', generalMs - scanMs);
row('versioning and delete rules, by subtraction', stackMs - mergeMs);
row('whole stack', stackMs);

if (flags.profile) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  for (let i = 0; i < 5; i++) await mergeOnly(store, inputs, total);
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(flags.profile, JSON.stringify(profile));
  const self = new Map<string, number>();
  let hits = 0;
  for (const n of profile.nodes) {
    const f = n.callFrame;
    const file = f.url.replace(/^.*\/(src|bench|node_modules)\//, '$1/').replace(/^node:.*/, 'node');
    const name = `${f.functionName || '(anonymous)'}${file ? ` (${file})` : ''}`;
    self.set(name, (self.get(name) ?? 0) + (n.hitCount ?? 0));
    hits += n.hitCount ?? 0;
  }
  say(`\nself time of five whole-stack merges (${flags.profile}):`);
  for (const [name, h] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
    say(`${((100 * h) / hits).toFixed(1).padStart(5)}%  ${name}`);
  }
}
