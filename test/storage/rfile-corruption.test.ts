/**
 * A damaged, truncated or foreign file is always CORRUPT_FILE naming the file — and, for damage inside a
 * block, the block — never a wrong read and never another kind of error (a TypeError would be a crash).
 * Single-byte damage is tried at every offset of two small files (one per codec) with several data and
 * index blocks, so every region of the format is covered: headers, payloads, index blocks, root, footer
 * tail and magic.
 */
import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import {
  COMPRESSIONS,
  makeEntry,
  MemoryObjectStore,
  RFileReader,
  writeRFile,
  type Compression,
  type Entry,
  type RowRange,
} from '../../src/storage/index.js';
import { BLOCK_HEADER_SIZE, crc32, FOOTER_TAIL_SIZE, KIND_DATA } from '../../src/storage/rfile/codec.js';
import { runs } from './arbitraries.js';
import { show } from './model.js';

interface Region {
  start: number;
  end: number;
  /** How an error about it must name it. */
  names: string;
}

/** Walks a file's blocks from its bytes (headers only, no checks): data blocks, index blocks, footer. */
function layout(bytes: Buffer): Region[] {
  const regions: Region[] = [];
  const footerLength = bytes.readUInt32BE(bytes.length - FOOTER_TAIL_SIZE) + FOOTER_TAIL_SIZE;
  const footerStart = bytes.length - footerLength;
  for (let pos = 0; pos < footerStart;) {
    const kind = bytes[pos]!;
    const number = bytes.readUInt32BE(pos + 4);
    const end = pos + BLOCK_HEADER_SIZE + bytes.readUInt32BE(pos + 8);
    regions.push({
      start: pos,
      end,
      names: `${kind === KIND_DATA ? 'data' : 'index'} block ${number} at offset ${pos}`,
    });
    pos = end;
  }
  regions.push({ start: footerStart, end: bytes.length, names: 'footer' });
  return regions;
}

/**
 * Replaces a data block's stored payload (same length, so no other block moves) and re-seals its
 * checksums: only the decoder can object.
 */
function resealed(file: Buffer, region: Region, stored: Buffer, codec: number, rawLength: number): Buffer {
  expect(stored.length).toBe(region.end - region.start - BLOCK_HEADER_SIZE);
  const out = Buffer.from(file);
  out[region.start + 1] = codec;
  out.writeUInt32BE(rawLength, region.start + 12);
  out.writeUInt32BE(crc32(stored), region.start + 20);
  out.writeUInt32BE(crc32(out.subarray(region.start, region.start + 24)), region.start + 24);
  stored.copy(out, region.start + BLOCK_HEADER_SIZE);
  return out;
}

function flip(buf: Buffer, at: number, mask: number): void {
  buf[at] = buf[at]! ^ mask;
}

/** Opens and reads everything (or a range): the entries, or the error. */
async function readAll(bytes: Buffer, range: RowRange = {}): Promise<unknown> {
  const store = new MemoryObjectStore();
  store.put('t/f.rf', bytes);
  try {
    const reader = await RFileReader.open(store, 't/f.rf');
    const out: Entry[] = [];
    for await (const e of reader.scan(range)) out.push(e);
    return out;
  } catch (err) {
    return err;
  }
}

/**
 * Flips bytes in the stored payload of random data blocks, forges their checksums with `forge`, and
 * reads the file: each result must be the entries (a flip the decoder cannot see: a changed value byte)
 * or CORRUPT_FILE naming that block, never a crash or another block. Returns how many were CORRUPT_FILE.
 */
async function forgedDamage(
  file: Buffer,
  blocks: Region[],
  numRuns: number,
  forge: (block: Region, stored: Buffer) => Buffer,
): Promise<number> {
  let corrupt = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.nat(),
      fc.array(fc.record({ at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }), {
        minLength: 1,
        maxLength: 4,
      }),
      async (which, flips) => {
        const block = blocks[which % blocks.length]!;
        const stored = Buffer.from(file.subarray(block.start + BLOCK_HEADER_SIZE, block.end));
        for (const f of flips) flip(stored, f.at % stored.length, f.xor);
        const result = await readAll(forge(block, stored));
        if (!Array.isArray(result)) {
          expectCorrupt(result, block.names);
          corrupt++;
        }
      },
    ),
    { numRuns },
  );
  return corrupt;
}

function expectCorrupt(result: unknown, names?: string): void {
  if (!(result instanceof ExcError) || result.code !== 'CORRUPT_FILE') {
    throw new Error(
      `expected CORRUPT_FILE${names ? ` naming ${names}` : ''}, got ${Array.isArray(result) ? `${result.length} entries` : String(result)}`,
    );
  }
  // Named by its key in the store, never by the store's URL (a local store's is a path on the server).
  expect(result.message).toContain('RFile t/f.rf');
  expect(result.message).not.toContain('memory://');
  if (names !== undefined) expect(result.message).toContain(names);
}

/** 40 entries in ~10 data blocks and 4 index blocks; values repeat so deflate really compresses. */
const ENTRIES = Array.from({ length: 40 }, (_, i) =>
  makeEntry(
    `row${String(i).padStart(3, '0')}`,
    'cf',
    `q${i % 3}`,
    1_000 + i,
    `value ${i % 4} `.repeat(3),
    i % 7 === 3,
  ),
);

for (const compression of COMPRESSIONS) {
  describe(`rfile corruption - ${compression}`, () => {
    let file: Buffer;
    let regions: Region[];

    beforeAll(async () => {
      const store = new MemoryObjectStore();
      await writeRFile(store, 'good.rf', ENTRIES, { blockSize: 200, indexBlockSize: 80, compression });
      file = store.bytes('good.rf');
      regions = layout(file);
      expect(show((await readAll(file)) as Entry[])).toEqual(show(ENTRIES));
    });

    it('the test file has every region: several data blocks, several index blocks, a footer', () => {
      expect(regions.filter((r) => r.names.startsWith('data block')).length).toBeGreaterThanOrEqual(6);
      expect(regions.filter((r) => r.names.startsWith('index block')).length).toBeGreaterThanOrEqual(3);
      if (compression === 'deflate') expect(file.length).toBeLessThan(3000);
    });

    it('any single damaged byte, anywhere, is CORRUPT_FILE naming the file and the region', async () => {
      for (const region of regions) {
        for (let offset = region.start; offset < region.end; offset++) {
          for (const mask of [0x01, 0x80, 0xff]) {
            const damaged = Buffer.from(file);
            flip(damaged, offset, mask);
            const result = await readAll(damaged);
            try {
              expectCorrupt(result, region.names);
            } catch (err) {
              throw new Error(
                `byte ${offset} ^ 0x${mask.toString(16)} in ${region.names}: ${(err as Error).message}`,
              );
            }
          }
        }
      }
    });

    it('damage in an index block is also found by a seek through it', async () => {
      for (const region of regions.filter((r) => r.names.startsWith('index block'))) {
        const damaged = Buffer.from(file);
        flip(damaged, region.start + BLOCK_HEADER_SIZE + 3, 0x10);
        // Every row after the first lies behind some index block; seek into each of them.
        const results = await Promise.all(ENTRIES.map((e) => readAll(damaged, { startRow: e.key.row })));
        expect(results.some((r) => r instanceof ExcError && r.message.includes(region.names))).toBe(true);
        for (const r of results) if (!Array.isArray(r)) expectCorrupt(r);
      }
    });

    it('truncation at any length is CORRUPT_FILE', async () => {
      for (let length = 0; length < file.length; length++) {
        expectCorrupt(await readAll(file.subarray(0, length)));
      }
    });

    it('bytes appended after the footer are CORRUPT_FILE', async () => {
      expectCorrupt(await readAll(Buffer.concat([file, Buffer.from('x')])), 'footer');
      expectCorrupt(await readAll(Buffer.concat([file, file])));
    });

    it('two data blocks swapped (each intact) are CORRUPT_FILE: every block knows its place', async () => {
      const [a, b] = regions.filter((r) => r.names.startsWith('data block'));
      const swapped = Buffer.concat([
        file.subarray(b!.start, b!.end),
        file.subarray(a!.start, a!.end),
        file.subarray(b!.end),
      ]);
      expectCorrupt(await readAll(swapped), 'data block 0 at offset 0: found data block 1');
    });

    it('random damage of several bytes is CORRUPT_FILE, or changes nothing', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ at: fc.nat(), xor: fc.integer({ min: 0, max: 255 }) }), {
            minLength: 1,
            maxLength: 8,
          }),
          async (flips) => {
            const damaged = Buffer.from(file);
            for (const f of flips) flip(damaged, f.at % file.length, f.xor);
            const result = await readAll(damaged);
            if (damaged.equals(file)) expect(show(result as Entry[])).toEqual(show(ENTRIES));
            else expectCorrupt(result);
          },
        ),
        { numRuns: runs(300) },
      );
    });
  });
}

describe('rfile corruption - a deflated file decoded ahead', () => {
  it('a block decoded ahead that does not inflate is CORRUPT_FILE for the scan, never an unhandled rejection', async () => {
    // Every block deflated, so blocks are inflated ahead of the scan while it hands on the current one:
    // the failure of one decoded ahead must reach the scan (an unhandled rejection ends the process).
    const store = new MemoryObjectStore();
    const entries = Array.from({ length: 5_000 }, (_, i) =>
      makeEntry(`row${String(i).padStart(6, '0')}`, 'f', 'q', 1, `v${i}`.repeat(20)),
    );
    await writeRFile(store, 'd.rf', entries, { compression: 'deflate' });
    const file = store.bytes('d.rf');
    const block = layout(file).filter((r) => r.names.startsWith('data block'))[2]!;
    const damaged = Buffer.from(file);
    damaged.writeUInt32BE(damaged.readUInt32BE(block.start + 12) + 1, block.start + 12);
    damaged.writeUInt32BE(crc32(damaged.subarray(block.start, block.start + 24)), block.start + 24);
    store.put('d.rf', damaged);
    const reader = await RFileReader.open(store, 'd.rf');
    const read = async () => {
      // A consumer slow enough for the blocks ahead to be decoded (and fail) while it works.
      for await (const _ of reader.scan({})) await new Promise((r) => setImmediate(r));
    };
    const err = await read().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ExcError);
    expect((err as ExcError).code).toBe('CORRUPT_FILE');
    expect((err as ExcError).message).toContain(block.names);
  });
});

describe('rfile corruption - garbage behind valid checksums', () => {
  /**
   * A raw deflate stream of exactly `length` bytes that inflates to zeros: a compressed run of zeros, led
   * by stored blocks that pad it (empty ones of 5 bytes, and up to four holding one zero byte, 6 bytes).
   */
  function deflatedTo(length: number): { stored: Buffer; rawLength: number } {
    const zeros = deflateRawSync(Buffer.alloc(10_000));
    const pad = length - zeros.length;
    // 5k + 6m = pad, and 6 ≡ 1 (mod 5), so m = pad mod 5.
    const m = pad % 5;
    const k = (pad - 6 * m) / 5;
    if (k < 0) throw new Error(`block too small to pad (${length} bytes)`);
    const empty = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);
    const oneZero = Buffer.from([0x00, 0x01, 0x00, 0xfe, 0xff, 0x00]);
    return {
      stored: Buffer.concat([...Array<Buffer>(k).fill(empty), ...Array<Buffer>(m).fill(oneZero), zeros]),
      rawLength: 10_000 + m,
    };
  }

  let file: Buffer;
  let blocks: Region[];
  beforeAll(async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'g.rf', ENTRIES, { blockSize: 200, indexBlockSize: 80, compression: 'none' });
    file = store.bytes('g.rf');
    blocks = layout(file).filter((r) => r.names.startsWith('data block'));
  });

  it('a data block whose checksums pass but whose bytes do not parse is CORRUPT_FILE naming the block', async () => {
    const numRuns = runs(1000);
    const corrupt = await forgedDamage(file, blocks, numRuns, (block, stored) =>
      resealed(file, block, stored, 0, stored.length),
    );
    // About a third of the runs leave a block that does not parse: the check above must really have run.
    expect(corrupt).toBeGreaterThanOrEqual(Math.floor(numRuns / 10));
  });

  it('a block declaring more than any table writes is CORRUPT_FILE before anything is allocated', async () => {
    // A file of a few kilobytes must not make a reader inflate (or allocate) hundreds of megabytes.
    const block = blocks[2]!;
    const { stored } = deflatedTo(block.end - block.start - BLOCK_HEADER_SIZE);
    expectCorrupt(await readAll(resealed(file, block, stored, 1, 256 * 1024 * 1024)), 'block too large');
  });

  it('a deflated block that inflates to more or less than its header says is CORRUPT_FILE naming the block', async () => {
    const block = blocks[2]!;
    const { stored, rawLength } = deflatedTo(block.end - block.start - BLOCK_HEADER_SIZE);
    expectCorrupt(await readAll(resealed(file, block, stored, 1, 100)), `${block.names}: cannot inflate`);
    expectCorrupt(
      await readAll(resealed(file, block, stored, 1, rawLength + 1)),
      `${block.names}: inflates to ${rawLength} bytes`,
    );
    // Inflating to exactly the promised size, but zeros: entries of empty fields, which then do not add up.
    expectCorrupt(await readAll(resealed(file, block, stored, 1, rawLength)), block.names);
    // Not a deflate stream at all.
    expectCorrupt(
      await readAll(resealed(file, block, Buffer.alloc(stored.length, 0xff), 1, 500)),
      `${block.names}: cannot inflate`,
    );
  });
});

describe('rfile corruption - compressed blocks that do not decompress', () => {
  /** The file's data blocks as written with `compression`, and which of them were stored compressed. */
  async function compressedFile(compression: Compression): Promise<{ file: Buffer; blocks: Region[] }> {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'c.rf', ENTRIES, { blockSize: 200, indexBlockSize: 80, compression });
    const file = store.bytes('c.rf');
    const blocks = layout(file).filter((r) => r.names.startsWith('data block') && file[r.start + 1] !== 0);
    return { file, blocks };
  }

  for (const compression of ['lz4', 'zstd'] as const) {
    it(`${compression} - damage behind valid checksums is CORRUPT_FILE naming the block, never a crash`, async () => {
      const { file, blocks } = await compressedFile(compression);
      expect(blocks.length).toBeGreaterThanOrEqual(3);
      const codec = file[blocks[0]!.start + 1]!;
      const numRuns = runs(500);
      const corrupt = await forgedDamage(file, blocks, numRuns, (block, stored) =>
        resealed(file, block, stored, codec, file.readUInt32BE(block.start + 12)),
      );
      expect(corrupt).toBeGreaterThanOrEqual(Math.floor(numRuns / 10));
    });

    it(`${compression} - a block that decompresses to another length than its header says is CORRUPT_FILE`, async () => {
      const { file, blocks } = await compressedFile(compression);
      const block = blocks[1]!;
      const codec = file[block.start + 1]!;
      const stored = Buffer.from(file.subarray(block.start + BLOCK_HEADER_SIZE, block.end));
      const rawLength = file.readUInt32BE(block.start + 12);
      for (const wrong of [rawLength - 1, rawLength + 1, 1]) {
        expectCorrupt(await readAll(resealed(file, block, stored, codec, wrong)), block.names);
      }
      // Not the codec's format at all.
      expectCorrupt(
        await readAll(resealed(file, block, Buffer.alloc(stored.length, 0xff), codec, rawLength)),
        `${block.names}: `,
      );
    });
  }
});

describe('rfile corruption - foreign files', () => {
  const foreign: [string, Buffer][] = [
    ['an empty file', Buffer.alloc(0)],
    ['one byte', Buffer.from([0])],
    ['19 bytes', randomBytes(19)],
    ['20 zero bytes', Buffer.alloc(20)],
    ['only the magic', Buffer.from('EXCRFILE')],
    ['random bytes', randomBytes(100_000)],
    ['a JSON document', Buffer.from(JSON.stringify({ not: 'an rfile', pad: 'x'.repeat(100) }))],
    ['a gzip stream', Buffer.from('1f8b0800000000000003cb48cdc9c95728cf2fca49010085114a0d0b000000', 'hex')],
  ];
  for (const [what, bytes] of foreign) {
    it(`${what} is CORRUPT_FILE`, async () => {
      expectCorrupt(await readAll(bytes));
    });
  }

  it('a tail with the magic but a bad footer checksum is CORRUPT_FILE', async () => {
    const tail = Buffer.alloc(FOOTER_TAIL_SIZE);
    tail.writeUInt32BE(10, 0);
    tail.writeUInt16BE(1, 8);
    Buffer.from('EXCRFILE').copy(tail, 12);
    expectCorrupt(await readAll(Buffer.concat([randomBytes(10), tail])), 'footer checksum mismatch');
  });

  it('a newer format version is CORRUPT_FILE saying so', async () => {
    const store = new MemoryObjectStore();
    await writeRFile(store, 'v.rf', ENTRIES.slice(0, 3));
    const file = store.bytes('v.rf');
    file.writeUInt16BE(2, file.length - 12);
    expectCorrupt(await readAll(file), 'unsupported format version 2');
  });
});
