/** A new table's split points, as `admin table create` gives them (UTF-8 or hex), checked. */
import { ExcError } from '../errors.js';

/** Split points, sorted check included: they must be strictly increasing as bytes and unique. */
export function parseSplits(utf8: string[], hexes: string[]): Buffer[] {
  if (utf8.length > 0 && hexes.length > 0)
    throw new ExcError('BAD_REQUEST', 'give splits or splitsHex, not both');
  const splits =
    utf8.length > 0 ? utf8.map((s) => Buffer.from(s, 'utf8')) : hexes.map((h) => Buffer.from(h, 'hex'));
  for (let i = 1; i < splits.length; i++) {
    const order = Buffer.compare(splits[i - 1]!, splits[i]!);
    if (order === 0) {
      throw new ExcError(
        'BAD_REQUEST',
        `duplicate split point ${JSON.stringify(splits[i]!.toString('utf8'))}`,
        {
          details: { field: 'body.splits' },
        },
      );
    }
    if (order > 0) {
      throw new ExcError(
        'BAD_REQUEST',
        `split points must be sorted: ${JSON.stringify(splits[i - 1]!.toString('utf8'))} comes before ${JSON.stringify(splits[i]!.toString('utf8'))}`,
        { details: { field: 'body.splits' } },
      );
    }
  }
  return splits;
}
