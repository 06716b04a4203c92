/**
 * Iterating entries in storage tests: drain what a reader, scan or iterator stack yields, and feed an
 * array to the stack as one of its sorted sources.
 *
 *   const got = await collect(iteratorStack(files.map(each), settings));
 */

/** Everything `it` yields, in order. */
export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of it) out.push(e);
  return out;
}

/** `items` as an async source (the iterator stack reads its sources asynchronously). */
export async function* each<T>(items: readonly T[]): AsyncGenerator<T> {
  yield* items;
}
