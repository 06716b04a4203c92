/** Rows as people read and type them (row-text.ts): what is shown can be given back, and bad text is refused. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { parseRow, showRow } from '../../src/row-text.js';

const b = (s: string, enc: BufferEncoding = 'latin1') => Buffer.from(s, enc);

describe('row text', () => {
  it('shows printable ASCII as itself and every other row as 0x and hex, a printable row starting with 0x too', () => {
    expect(showRow(b('events_2026'))).toBe('events_2026');
    expect(showRow(b('a b~'))).toBe('a b~');
    expect(showRow(b('00ff', 'hex'))).toBe('0x00ff');
    expect(showRow(b('tab\there'))).toBe('0x7461620968657265');
    expect(showRow(b('café', 'utf8'))).toBe('0x636166c3a9');
    // Text that looks like the hex form is shown in hex, or it would read back as other bytes.
    expect(showRow(b('0x41'))).toBe('0x30783431');
    expect(showRow(b('0'))).toBe('0');
    expect(showRow(b(''))).toBe('');
  });

  it('reads back every row it shows, whatever its bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        const row = Buffer.from(bytes);
        expect(parseRow(showRow(row), '--start').equals(row)).toBe(true);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme-ascii' }), (text) => {
        expect(parseRow(showRow(b(text)), '--start').toString('latin1')).toBe(text);
      }),
    );
  });

  it('reads text as UTF-8 and 0x with whole hex bytes as those bytes, in either case', () => {
    expect(parseRow('café', '--start')).toEqual(b('café', 'utf8'));
    expect(parseRow('0x00FFab', '--start')).toEqual(b('00ffab', 'hex'));
    expect(parseRow('x0x1', '--start')).toEqual(b('x0x1'));
  });

  it('refuses 0x without whole hex bytes after it, and U+FFFD, naming the flag', () => {
    const refused = (text: string, message: RegExp): void => {
      let error: unknown;
      try {
        parseRow(text, '--end');
      } catch (err) {
        error = err;
      }
      expect(error, text).toBeInstanceOf(ExcError);
      expect((error as ExcError).code).toBe('BAD_REQUEST');
      expect((error as ExcError).message).toMatch(/^--end /);
      expect((error as ExcError).message).toMatch(message);
    };
    refused('0x', /after 0x, a row's bytes in hex/);
    refused('0xabc', /after 0x, a row's bytes in hex/);
    refused('0xzz', /starts with 0x goes in hex too \(0x30787a7a\)/);
    refused('row\ufffd', /holds U\+FFFD.*give the row's bytes in hex/);
  });
});
