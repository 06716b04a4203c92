/**
 * Rows where people read and type them (the CLI's tables and arguments, error messages): a row of
 * printable ASCII as itself, any other row as `0x` and its bytes in hex. A printable row that itself
 * begins with `0x` is shown in hex too, so that the two forms never meet and whatever the CLI prints can
 * be given back to it: `excompact admin table show` prints a binary split point as `0x00ff`, and
 * `excompact scan t --start 0x00ff` starts there.
 */
import { ExcError } from './errors.js';

const PRINTABLE = /^[\x20-\x7e]*$/;
const HEX_BYTES = /^(?:[0-9a-fA-F]{2})+$/;

/** A row as text when it is printable ASCII not starting with `0x`, else `0x` and its bytes in hex. */
export function showRow(row: Buffer): string {
  const text = row.toString('latin1');
  return PRINTABLE.test(text) && !text.startsWith('0x') ? text : `0x${row.toString('hex')}`;
}

/**
 * The bytes of a row typed as text (`what` names where, `--start`): `0x` and hex digits are the bytes
 * they spell, anything else is UTF-8 text. BAD_REQUEST for `0x` without whole hex bytes after it, and
 * for text holding U+FFFD: Node hands a program its arguments decoded as UTF-8, so bytes that were not
 * UTF-8 arrive as U+FFFD, and the row asked for cannot be known (its bytes go in hex).
 */
export function parseRow(text: string, what: string): Buffer {
  if (text.startsWith('0x')) {
    const hex = text.slice(2);
    if (!HEX_BYTES.test(hex)) {
      throw new ExcError(
        'BAD_REQUEST',
        `${what} ${JSON.stringify(text)}: after 0x, a row's bytes in hex (two digits 0-9 a-f per byte); a row of text that starts with 0x goes in hex too (0x${Buffer.from(text).toString('hex')})`,
        { details: { field: what } },
      );
    }
    return Buffer.from(hex, 'hex');
  }
  if (text.includes('\ufffd')) {
    throw new ExcError(
      'BAD_REQUEST',
      `${what} holds U+FFFD, which is what bytes that are not UTF-8 become in a command's arguments; give the row's bytes in hex (0x…)`,
      { details: { field: what } },
    );
  }
  return Buffer.from(text, 'utf8');
}
