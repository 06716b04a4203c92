import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configReference } from '../../src/config.js';

/** A Markdown table as rows of trimmed cells, so column padding (added by the formatter) does not matter. */
function cells(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/^-+$/, '---')),
    );
}

describe('docs', () => {
  it('the README configuration reference is the one the code validates', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const match = /<!-- config-reference:start -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(readme);
    expect(match).not.toBeNull();
    expect(cells(match![1]!)).toEqual(cells(configReference()));
  });
});
