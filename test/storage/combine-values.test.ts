/**
 * The combiners' arithmetic (combineValues, src/storage/iterators/table-iterators.ts): exact at any size —
 * numbers while they are safe integers, bigints past them — with values that are no decimal integer left
 * out, for entries as the merge hands them (views of decoded blocks) and as plain objects.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryObjectStore, RFileReader, writeRFile, type Entry } from '../../src/storage/index.js';
import { combineValues, type CombineOp } from '../../src/storage/iterators/table-iterators.js';

const INTEGER = /^-?(?:0|[1-9][0-9]{0,99})$/;

const value = fc.oneof(
  fc.integer({ min: -1_000, max: 1_000 }).map(String),
  fc.bigInt({ min: -(2n ** 60n), max: 2n ** 60n }).map(String),
  // Around the largest safe integer, where sums leave the numbers.
  fc
    .tuple(fc.boolean(), fc.bigInt({ min: 2n ** 53n - 50n, max: 2n ** 53n + 50n }))
    .map(([negative, n]) => String(negative ? -n : n)),
  fc.bigInt({ min: 10n ** 98n, max: 10n ** 100n - 1n }).map(String),
  fc.constantFrom('', '-', '-0', '007', '1.5', '12a', ' 3', 'x', '1'.repeat(101), '+4'),
);

function reference(op: CombineOp, values: string[]): string {
  if (op === 'latest') return values[0]!;
  const ints = values.filter((v) => INTEGER.test(v)).map((v) => BigInt(v));
  if (ints.length === 0) return values[0]!;
  return String(
    ints.reduce((a, b) => (op === 'sum' ? a + b : op === 'min' ? (b < a ? b : a) : b > a ? b : a)),
  );
}

const plain = (values: string[]): Entry[] =>
  values.map((v, i) => ({
    key: {
      row: Buffer.from('r'),
      family: Buffer.from('f'),
      qualifier: Buffer.from(''),
      timestamp: 1000 - i,
      deleted: false,
    },
    value: Buffer.from(v, 'latin1'),
  }));

/** The same puts as the merge sees them: entries of a decoded block. */
async function fromBlocks(values: string[]): Promise<Entry[]> {
  const store = new MemoryObjectStore();
  await writeRFile(store, 'v.rf', plain(values), { compression: 'none' });
  const reader = await RFileReader.open(store, 'v.rf');
  const out: Entry[] = [];
  for await (const batch of reader.scanBatches()) out.push(...batch);
  return out;
}

describe('combiners - arithmetic', () => {
  it('sum, min, max and latest are exact at any size, from blocks and from plain entries', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<CombineOp>('sum', 'min', 'max', 'latest'),
        fc.array(value, { minLength: 1, maxLength: 12 }),
        async (op, values) => {
          const want = reference(op, values);
          expect(combineValues(op, plain(values)).toString('latin1')).toBe(want);
          expect(combineValues(op, await fromBlocks(values)).toString('latin1')).toBe(want);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('example - a sum past the largest safe integer keeps every digit', () => {
    const big = String(2 ** 53 - 1);
    expect(combineValues('sum', plain([big, big, '1'])).toString()).toBe(String(2n * (2n ** 53n - 1n) + 1n));
    expect(combineValues('sum', plain(['-0', 'x'])).toString()).toBe('0');
    expect(combineValues('max', plain(['x', '007'])).toString()).toBe('x');
  });
});
