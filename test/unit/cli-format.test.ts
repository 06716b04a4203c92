import { describe, expect, it } from 'vitest';
import { formatTable, progressBar } from '../../src/cli/format.js';
import { shortCompactorName } from '../../src/meta/views.js';

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

describe('compactor names', () => {
  it('names - a protected node path becomes queue@host#seq', () => {
    const path = '/excompact/compactors/q001/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-c-0000000012';
    expect(shortCompactorName(path, 'small', '10.0.0.7')).toBe('small@10.0.0.7#12');
    expect(shortCompactorName(path, 'small')).toBe('small#12');
    expect(shortCompactorName('/x/odd-node-name', null)).toBe('#ode-name');
  });
});

describe('progress bars', () => {
  it('progressBar - fills in proportion, clamped to 0..1', () => {
    expect(progressBar(0, 10)).toBe('[..........]');
    expect(progressBar(0.5, 10)).toBe('[#####.....]');
    expect(progressBar(1.7, 4)).toBe('[####]');
    expect(progressBar(-1, 4)).toBe('[....]');
  });
});
