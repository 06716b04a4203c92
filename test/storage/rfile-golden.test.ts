/**
 * Golden files pin the RFile format: writing these entries must produce exactly the checked-in bytes,
 * and reading the checked-in bytes must give back the entries. A format change shows up here as a diff;
 * if it is intended, bump FORMAT_VERSION and regenerate with `EXC_UPDATE_GOLDEN=1 npx vitest run
 * test/storage/rfile-golden.test.ts`. (The deflate fixture also pins zlib's output at level 1: a Node
 * upgrade that changes zlib may change those bytes without any format change; likewise the lz4 and zstd
 * fixtures pin lz4-napi's and zstd-napi's output: the read test is the one that guards compatibility.)
 * Fixtures named compat-* were written by earlier versions and are only read.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  COMPRESSIONS,
  FORMAT_VERSION,
  makeEntry,
  MAX_TIMESTAMP,
  MemoryObjectStore,
  RFileReader,
  writeRFile,
  type Entry,
} from '../../src/storage/index.js';
import { BLOCK_HEADER_SIZE, FOOTER_TAIL_SIZE } from '../../src/storage/rfile/codec.js';
import { show } from './model.js';

const FIXTURES = new URL('../fixtures/storage/', import.meta.url);

/** Deletes, empty fields, binary bytes, a 2-byte varint length, the largest timestamp. */
const ENTRIES: Entry[] = [
  makeEntry('', '', '', 0),
  makeEntry(Buffer.from([0x00]), 'cf', 'q', 7, 'zero row'),
  makeEntry('apple', 'cf', 'color', MAX_TIMESTAMP, 'red'),
  makeEntry('apple', 'cf', 'color', 1_700_000_000_000, '', true),
  makeEntry('apple', 'cf', 'color', 1_600_000_000_000, 'green'),
  makeEntry('apple', 'cf', 'size', 5, 'x'.repeat(200)),
  makeEntry('banana', 'cf', 'color', 3, 'yellow'),
  makeEntry('banana', 'cg', '', 3, Buffer.from([0xff, 0x00, 0x80])),
  makeEntry('cherry', 'cf', 'color', 9, '', true),
  makeEntry('cherry', 'cf', 'color', 9, 'dark red'),
  makeEntry('cherry', 'cf', 'color', 9, 'red'),
  makeEntry(Buffer.from([0xff, 0xfe]), Buffer.from([0xff]), Buffer.from([0x01]), 2 ** 32, 'last'),
];

const OPTIONS = { blockSize: 96, indexBlockSize: 64 };

for (const compression of COMPRESSIONS) {
  describe(`rfile golden - ${compression}`, () => {
    const fixture = new URL(`golden-${compression}.rf`, FIXTURES);

    it('writing the golden entries produces exactly the golden bytes', async () => {
      const store = new MemoryObjectStore();
      const summary = await writeRFile(store, 'golden.rf', ENTRIES, { ...OPTIONS, compression });
      const bytes = store.bytes('golden.rf');
      if (process.env.EXC_UPDATE_GOLDEN === '1') {
        mkdirSync(FIXTURES, { recursive: true });
        writeFileSync(fixture, bytes);
      }
      expect(existsSync(fixture), `${fixture.pathname} is missing; EXC_UPDATE_GOLDEN=1 writes it`).toBe(true);
      expect(summary.blocks).toBeGreaterThan(3);
      expect(bytes.toString('hex')).toBe(readFileSync(fixture).toString('hex'));
    });

    it('the golden file has a block of its codec (the fixture pins the codec, not only the format)', () => {
      const bytes = readFileSync(fixture);
      const codecs = new Set<number>();
      // Blocks start at 0 and follow each other: kind, codec, reserved, number, storedLength at 8.
      const footerStart =
        bytes.length - FOOTER_TAIL_SIZE - bytes.readUInt32BE(bytes.length - FOOTER_TAIL_SIZE);
      for (let pos = 0; pos < footerStart; pos += BLOCK_HEADER_SIZE + bytes.readUInt32BE(pos + 8)) {
        codecs.add(bytes[pos + 1]!);
      }
      expect(codecs.has(COMPRESSIONS.indexOf(compression))).toBe(true);
    });

    it('reading the golden bytes gives back the golden entries', async () => {
      const store = new MemoryObjectStore();
      store.put('golden.rf', readFileSync(fixture));
      const reader = await RFileReader.open(store, 'golden.rf');
      expect(reader.summary.entries).toBe(ENTRIES.length);
      const read: Entry[] = [];
      for await (const e of reader.scan()) read.push(e);
      expect(show(read)).toEqual(show(ENTRIES));
      // The version in the tail, and the magic.
      const bytes = readFileSync(fixture);
      expect(bytes.readUInt16BE(bytes.length - 12)).toBe(FORMAT_VERSION);
      expect(bytes.subarray(bytes.length - 8).toString('latin1')).toBe('EXCRFILE');
    });
  });
}

describe('rfile compatibility - zstd frames without a content size', () => {
  // Written with the same entries and options by @toondepauw/node-zstd, whose streaming encoder left the
  // content size out of each frame; zstd-napi's frames carry it. Files written then must still read.
  it('reads a file of such frames back to the golden entries', async () => {
    const store = new MemoryObjectStore();
    store.put('old.rf', readFileSync(new URL('compat-zstd-without-content-size.rf', FIXTURES)));
    const reader = await RFileReader.open(store, 'old.rf');
    const read: Entry[] = [];
    for await (const e of reader.scan()) read.push(e);
    expect(show(read)).toEqual(show(ENTRIES));
  });
});
