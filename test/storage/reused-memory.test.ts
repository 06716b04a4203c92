/**
 * Memory used again (src/storage/rfile/buffer-pool.ts): a scan that reads into pooled chunks and hands
 * out blocks in pooled memory (RFileReader.rawBlocks with `alloc`, what the native merge does), and a
 * writer that compresses every block into the same few buffers, must give exactly the bytes of fresh
 * memory. Files of several megabytes, so that scans cross many chunks (256 KiB) and blocks span them;
 * every codec, with blocks that do not compress (stored as they are) among those that do. On S3 the
 * chunks are what each socket read brought (s3-read-into.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { COMPRESSIONS } from '../../src/compressions.js';
import {
  compactFiles,
  LocalObjectStore,
  MemoryObjectStore,
  openObjectStore,
  RFileReader,
  writeRFile,
  type Entry,
  type ObjectStore,
} from '../../src/storage/index.js';
import { nativeMerge } from '../../src/storage/native-merge.js';
import { BufferPool } from '../../src/storage/rfile/buffer-pool.js';
import { uniqueName, useS3 } from '../support/index.js';

const dirs: string[] = [];
const opened: ObjectStore[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await Promise.all(opened.map((s) => s.close()));
});

const s3 = useS3();

function s3Store(): ObjectStore {
  const store = openObjectStore({
    store: `s3://${s3().bucket}/${uniqueName('reuse-')}`,
    s3Endpoint: s3().endpoint,
    s3Region: s3().region,
    s3AccessKeyId: s3().accessKeyId,
    s3SecretAccessKey: s3().secretAccessKey,
    s3ForcePathStyle: true,
  });
  opened.push(store);
  return store;
}

function localStore(): LocalObjectStore {
  const dir = mkdtempSync(join(tmpdir(), 'exc-reuse-'));
  dirs.push(dir);
  return new LocalObjectStore(dir);
}

/** Deterministic bytes: runs of one letter (compressible) or noise (not), by stretches of entries. */
function value(i: number, seed: number): Buffer {
  const v = Buffer.allocUnsafe(40 + ((i * 7 + seed) % 300));
  if (Math.floor(i / 400) % 3 === 0) {
    let x = (i + 1) * 2654435761 + seed;
    for (let j = 0; j < v.length; j++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      v[j] = x & 0xff;
    }
  } else {
    v.fill(97 + ((i + seed) % 26));
  }
  return v;
}

function entriesOf(file: number, files: number, count: number): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    key: {
      row: Buffer.from(`row${String(i * files + file).padStart(8, '0')}`),
      family: Buffer.from('f'),
      qualifier: Buffer.from(`q${i % 3}`),
      visibility: Buffer.alloc(0),
      timestamp: 1_700_000_000_000 + i,
      deleted: i % 97 === 0,
    },
    value: value(i, file),
  }));
}

async function bytesOf(store: ObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

const stores: [string, () => ObjectStore][] = [
  ['local', localStore],
  ['memory', () => new MemoryObjectStore()],
  ['s3', s3Store],
];

describe.each(stores)('reused memory - %s store', (_label, open) => {
  // Four files, one per codec, ~2.5 MB each before compression.
  const prepare = async (): Promise<{ store: ObjectStore; inputs: string[] }> => {
    const store = open();
    const inputs: string[] = [];
    for (const [f, codec] of COMPRESSIONS.entries()) {
      inputs.push(`tables/t/in-${codec}.rf`);
      await writeRFile(store, inputs[f]!, entriesOf(f, COMPRESSIONS.length, 12_000), {
        compression: codec,
      });
    }
    return { store, inputs };
  };

  it('a scan into pooled chunks hands out the blocks a scan into fresh memory does', async () => {
    const { store, inputs } = await prepare();
    for (const name of inputs) {
      const reader = await RFileReader.open(store, name);
      const fresh: Buffer[] = [];
      for await (const b of reader.rawBlocks()) fresh.push(Buffer.from(b.payload));
      // Each block given back as soon as the next is in hand, as the merge does: any memory still in
      // use that the reader reads into again shows as a block that differs.
      const pool = new BufferPool(128 * 1024, 4);
      let previous: Buffer | null = null;
      let i = 0;
      for await (const b of reader.rawBlocks({}, { alloc: pool.take })) {
        expect(b.payload.equals(fresh[i]!), `${name}: block ${i}`).toBe(true);
        pool.give(previous);
        previous = b.payload;
        i++;
      }
      expect(i).toBe(fresh.length);
      expect(fresh.length).toBeGreaterThan(30);
    }
  });

  it.skipIf(nativeMerge() === null)(
    'a compaction with reused memory (native merge) writes the bytes of one without (JavaScript merge)',
    async () => {
      const { store, inputs } = await prepare();
      const settings = { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: true };
      for (const compression of COMPRESSIONS) {
        const outputs: Buffer[] = [];
        for (const native of [true, false]) {
          const output = `tables/t/out-${compression}-${native}.rf`;
          const r = await compactFiles({ store, inputs, output, settings, compression, nativeMerge: native });
          expect(r.nativeMerge).toBe(native);
          // Every block read back and checked (a compressed block overwritten before it was written
          // fails its checksum), every entry there.
          let entries = 0;
          const reader = await RFileReader.open(store, output);
          for await (const batch of reader.scanBatches()) entries += batch.length;
          expect(entries).toBe(r.entriesWritten);
          outputs.push(await bytesOf(store, output));
        }
        expect(outputs[0]!.length).toBeGreaterThan(1 << 20);
        expect(outputs[0]!.equals(outputs[1]!), compression).toBe(true);
      }
    },
  );
});
