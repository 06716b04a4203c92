/**
 * The merge benchmark's data set: K files of N entries each, interleaved so that a merge really has to
 * compare (each group of K consecutive keys is spread over the K files in a pseudo-random rotation),
 * written twice — as RFiles through the real writer, and as the same entries in sorted text lines for
 * `sort -m`. Deterministic: the same flags give the same bytes.
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import {
  writeRFile,
  type Compression,
  type Entry,
  type FileSummary,
  type ObjectStore,
} from '../src/storage/index.js';

export interface DataSpec {
  files: number;
  entries: number;
  valueBytes: number;
  compression: Compression;
  /**
   * Consecutive keys each file gets at a time (default 1: the files interleave key by key, the merge's
   * worst case). Longer runs are inputs that overlap less, as most compactions' do.
   */
  runLength?: number;
}

const BASE_TS = 1_700_000_000_000;
const MAX_TS = Number.MAX_SAFE_INTEGER;

/** A pool of pseudo-random lowercase letters that values are cut from (text-safe, so `sort` sees the same bytes). */
function letterPool(size: number): Buffer {
  const pool = Buffer.allocUnsafe(size);
  let x = 0x9e3779b9;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pool[i] = 97 + ((x >>> 0) % 26);
  }
  return pool;
}

function hash(i: number): number {
  let h = Math.imul(i ^ 0x5bd1e995, 0x27d4eb2d);
  h ^= h >>> 15;
  return h >>> 0;
}

/**
 * The i-th key index of file f: every index 0..K*N-1 belongs to exactly one file, each file in order.
 * Keys go to files in runs of `runLength` consecutive keys (1: every key of a group of K in another file).
 */
function keyIndex(spec: DataSpec, f: number, i: number): number {
  const r = spec.runLength ?? 1;
  const g = Math.floor(i / r);
  return (g * spec.files + ((f + hash(g)) % spec.files)) * r + (i % r);
}

export function fileName(f: number): string {
  return `input/f${String(f).padStart(3, '0')}.rf`;
}

function* entriesOf(spec: DataSpec, f: number, pool: Buffer): Generator<Entry> {
  for (let i = 0; i < spec.entries; i++) {
    const idx = keyIndex(spec, f, i);
    const off = (idx * 7919) % (pool.length - spec.valueBytes);
    yield {
      key: {
        row: Buffer.from(`row${String(idx).padStart(10, '0')}`),
        family: Buffer.from(`cf${idx % 4}`),
        qualifier: Buffer.from(`cq${idx % 16}`),
        timestamp: BASE_TS + idx,
        deleted: false,
      },
      value: pool.subarray(off, off + spec.valueBytes),
    };
  }
}

/** Writes the K RFiles into `store`; returns their summaries. */
export async function writeDataSet(store: ObjectStore, spec: DataSpec): Promise<FileSummary[]> {
  const pool = letterPool(1 << 20);
  const out: FileSummary[] = [];
  for (let f = 0; f < spec.files; f++) {
    out.push(
      await writeRFile(store, fileName(f), entriesOf(spec, f, pool), { compression: spec.compression }),
    );
  }
  return out;
}

/**
 * Writes the same entries as text lines, one file per input, sorted in C-locale byte order exactly as the
 * key order sorts them (fixed-width rows, the timestamp inverted so that newer sorts first).
 */
export async function writeTextFiles(
  dir: string,
  spec: DataSpec,
): Promise<{ paths: string[]; bytes: number }> {
  const pool = letterPool(1 << 20);
  const paths: string[] = [];
  let bytes = 0;
  for (let f = 0; f < spec.files; f++) {
    const path = join(dir, `f${String(f).padStart(3, '0')}.txt`);
    const out = createWriteStream(path);
    let lines: string[] = [];
    for (const e of entriesOf(spec, f, pool)) {
      const k = e.key;
      const inverted = String(MAX_TS - k.timestamp).padStart(16, '0');
      const line = `${k.row.toString('latin1')}\t${k.family.toString('latin1')}\t${k.qualifier.toString('latin1')}\t${inverted}\t1\t${e.value.toString('latin1')}\n`;
      bytes += line.length;
      lines.push(line);
      if (lines.length === 4096) {
        if (!out.write(lines.join(''))) await once(out, 'drain');
        lines = [];
      }
    }
    out.end(lines.join(''));
    await once(out, 'finish');
    paths.push(path);
  }
  return { paths, bytes };
}
