/**
 * One compaction in a fresh process, so that its peak memory (VmHWM) is its own:
 *
 *   tsx bench/merge-child.ts <store dir> <output> <none|deflate|lz4|zstd> <input>...
 *
 * Prints one JSON line: { ms, cpuMs, startRss, peakRss, peakHeap, peakBuffers, entriesWritten, bytesRead } —
 * peakHeap and peakBuffers are the largest JS heap and Buffer (ArrayBuffer) memory seen every 20 ms, live
 * or garbage not yet collected.
 */
import { compactFiles, LocalObjectStore, type Compression } from '../src/storage/index.js';
import { peakRss } from './merge-measure.js';

const [dir, output, compression, ...inputs] = process.argv.slice(2);
if (!dir || !output || !compression || inputs.length === 0) {
  process.stderr.write('usage: merge-child.ts <store dir> <output> <none|deflate|lz4|zstd> <input>...\n');
  process.exit(2);
}
const store = new LocalObjectStore(dir);
const startRss = peakRss();
let peakHeap = 0;
let peakBuffers = 0;
const sample = (): void => {
  const m = process.memoryUsage();
  peakHeap = Math.max(peakHeap, m.heapUsed);
  peakBuffers = Math.max(peakBuffers, m.arrayBuffers);
};
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const result = await compactFiles({
  store,
  inputs,
  output,
  settings: { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: true },
  compression: compression as Compression,
  onProgress: sample,
  progressEveryMs: 20,
});
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const cpuMs = (cpu.user + cpu.system) / 1000;
await store.delete(output);
process.stdout.write(
  `${JSON.stringify({ ms, cpuMs, startRss, peakRss: peakRss(), peakHeap, peakBuffers, entriesWritten: result.entriesWritten, bytesRead: result.bytesRead })}\n`,
);
