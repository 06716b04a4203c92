/**
 * The lines of an NDJSON file as text, each checked to be UTF-8 first. Reading through a string decoder
 * (node:readline) would turn bytes that are not UTF-8 — a Latin-1 export, a binary value pasted in —
 * into U+FFFD and ingest that, another value than the file holds, with nothing said; here such a line is
 * an error naming it and the byte.
 */
import { isUtf8 } from 'node:buffer';
import { createReadStream } from 'node:fs';
import { ExcError } from '../errors.js';

/**
 * Longer lines are refused: more than an entry at the tablet servers' limits takes as JSON (64 KiB key
 * parts and a 4 MiB value, in base64 or escaped), and a file with no line breaks is not read whole.
 */
export const MAX_LINE_BYTES = 32 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/** Each line of the file (numbered from 1, CRLF or LF, without its line break), blank ones too. */
export async function* ndjsonLines(path: string): AsyncGenerator<{ line: number; text: string }> {
  let line = 0;
  let pieces: Buffer[] = [];
  let pending = 0;
  const finish = (tail: Buffer): { line: number; text: string } => {
    line++;
    let bytes = pieces.length === 0 ? tail : Buffer.concat([...pieces, tail]);
    pieces = [];
    pending = 0;
    if (bytes.length > 0 && bytes[bytes.length - 1] === CR) bytes = bytes.subarray(0, -1);
    if (!isUtf8(bytes)) {
      throw new ExcError(
        'BAD_REQUEST',
        `line ${line}: not UTF-8 (byte ${firstInvalidByte(bytes) + 1}); give binary as base64 ("encoding":"base64")`,
      );
    }
    return { line, text: bytes.toString('utf8') };
  };
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let lf = chunk.indexOf(LF); lf >= 0; lf = chunk.indexOf(LF, from)) {
      if (pending + lf - from > MAX_LINE_BYTES) throw tooLong(line + 1);
      yield finish(chunk.subarray(from, lf));
      from = lf + 1;
    }
    if (from < chunk.length) {
      pending += chunk.length - from;
      if (pending > MAX_LINE_BYTES) throw tooLong(line + 1);
      pieces.push(chunk.subarray(from));
    }
  }
  if (pending > 0) yield finish(Buffer.alloc(0));
}

function tooLong(line: number): ExcError {
  return new ExcError(
    'BAD_REQUEST',
    `line ${line}: longer than ${MAX_LINE_BYTES} bytes, more than any entry the tablet servers accept`,
  );
}

/**
 * Where the first byte that is not UTF-8 is: decoding puts U+FFFD there, so the bytes encoded back first
 * differ from the line's at it (a U+FFFD the line really holds encodes back as itself).
 */
function firstInvalidByte(bytes: Buffer): number {
  const again = Buffer.from(bytes.toString('utf8'), 'utf8');
  let i = 0;
  while (i < bytes.length && i < again.length && bytes[i] === again[i]) i++;
  return i;
}
