import { describe, expect, it } from 'vitest';
import { formatTable } from '../../src/cli/format.js';

describe('cli format', () => {
  it('formatTable - columns align on their widest cell, the last is not padded, missing cells show -', () => {
    expect(
      formatTable(
        ['QUEUE', 'QUEUED', 'COMPACTORS'],
        [
          ['small', 12, 2],
          ['size256M', null, 10],
        ],
      ),
    ).toBe('QUEUE     QUEUED  COMPACTORS\nsmall     12      2\nsize256M  -       10\n');
  });

  it('formatTable - no rows says so under the header', () => {
    expect(formatTable(['A', 'B'], [])).toBe('A  B\n(none)\n');
  });
});
