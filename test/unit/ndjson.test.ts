/**
 * NDJSON lines read as bytes: line breaks, lines across read chunks, and text that is not UTF-8 refused
 * with its line and byte rather than ingested as U+FFFD.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_LINE_BYTES, ndjsonLines } from '../../src/cli/ndjson.js';
import { utf8Bytes } from '../../src/validate.js';

const dir = mkdtempSync(join(tmpdir(), 'ndjson-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
async function lines(content: Buffer | string): Promise<{ line: number; text: string }[]> {
  const path = join(dir, `f${files++}.ndjson`);
  writeFileSync(path, content);
  const out: { line: number; text: string }[] = [];
  for await (const l of ndjsonLines(path)) out.push(l);
  return out;
}

describe('ndjsonLines', () => {
  it('lines - LF and CRLF breaks, blank lines, a last line without a break, non-ASCII text kept exactly', async () => {
    const text = ['{"row":"a"}', '', '{"row":"é😀\uFFFD"}', '{"row":"c"}'];
    expect(await lines(`${text[0]}\r\n${text[1]}\n${text[2]}\r\n${text[3]}`)).toEqual(
      text.map((t, i) => ({ line: i + 1, text: t })),
    );
    expect(await lines('')).toEqual([]);
    expect(await lines('\n')).toEqual([{ line: 1, text: '' }]);
  });

  it('lines - a line longer than a read chunk, and a character cut between chunks, come out whole', async () => {
    // createReadStream reads 64 KiB at a time: the emoji's four bytes (at 65,534) straddle the first boundary.
    const long = `{"row":"r","value":"${'x'.repeat(65_536 - 34)}😀${'y'.repeat(200_000)}"}`;
    expect(await lines(`{"row":"a"}\n${long}\n{"row":"b"}\n`)).toEqual([
      { line: 1, text: '{"row":"a"}' },
      { line: 2, text: long },
      { line: 3, text: '{"row":"b"}' },
    ]);
  });

  it('lines - bytes that are not UTF-8 are refused with the line and the byte', async () => {
    const latin1 = Buffer.concat([Buffer.from('{"row":"a"}\n{"row":"caf'), Buffer.from([0xe9, 0x22, 0x7d])]);
    await expect(lines(latin1)).rejects.toThrow(/^line 2: not UTF-8 \(byte 12\)/);
    // A sequence cut short, and an overlong encoding of "/".
    await expect(lines(Buffer.from([0x61, 0xf0, 0x9f, 0x98]))).rejects.toThrow(
      /^line 1: not UTF-8 \(byte 2\)/,
    );
    await expect(lines(Buffer.from([0x0a, 0xc0, 0xaf]))).rejects.toThrow(/^line 2: not UTF-8 \(byte 1\)/);
  });

  it('lines - a line over the limit is refused without being read whole', async () => {
    await expect(lines(Buffer.alloc(MAX_LINE_BYTES + 1, 0x61))).rejects.toThrow(
      new RegExp(`^line 1: longer than ${MAX_LINE_BYTES} bytes`),
    );
  });
});

describe('utf8Bytes', () => {
  it('utf8 - a well-formed string is its UTF-8 bytes; a lone surrogate is BAD_REQUEST naming the field', () => {
    expect(utf8Bytes('é😀', 'row')).toEqual(Buffer.from([0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80]));
    for (const [s, at] of [
      ['ab\ud800', 3],
      ['\udc00', 1],
      ['😀\ude00x', 2], // a low surrogate after a complete pair
    ] as const) {
      let error: unknown;
      try {
        utf8Bytes(s, 'entry 4: value');
      } catch (err) {
        error = err;
      }
      expect(error).toMatchObject({ code: 'BAD_REQUEST' });
      expect((error as Error).message).toMatch(
        new RegExp(`^entry 4: value holds a lone UTF-16 surrogate \\(character ${at}\\)`),
      );
    }
  });
});
