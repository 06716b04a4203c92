import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { intOption } from '../../src/cli/flags.js';

describe('cli flags', () => {
  it('intOption - accepts integers in range, refuses the rest naming the flag and its range', () => {
    const bins = intOption('--bins', 1, 4096);
    expect(bins('1')).toBe(1);
    expect(bins('4096')).toBe(4096);
    for (const bad of ['0', '4097', '1.5', 'x', '-3'])
      expect(() => bins(bad), bad).toThrow(
        new InvalidArgumentError('--bins must be an integer from 1 to 4096'),
      );

    expect(intOption('--limit', 1)('1000000')).toBe(1_000_000);
    expect(() => intOption('--limit', 1)('0')).toThrow('--limit must be a positive integer');
    expect(intOption('--grace', 0)('0')).toBe(0);
    expect(() => intOption('--long-poll', 100)('99')).toThrow('--long-poll must be an integer >= 100');
  });
});
