/**
 * What the fuzzer sends: values of every kind a hostile or careless client could put in a field — right
 * and wrong types, missing and extra fields, names objects inherit, huge and negative numbers, unicode and
 * NUL, path-like names, oversized strings — mixed with names and rows that exist in the cluster, so that
 * requests reach past validation often enough to test what lies behind it.
 */
import fc from 'fast-check';

/** Names and rows that exist in the cluster under test, read before each request. */
export interface Known {
  tables: string[];
  queues: string[];
  /** Tablet rows (`0001;m`, `0001<`). */
  tablets: string[];
  /** Compactor node paths. */
  compactors: string[];
  /** The tablet server's ZooKeeper session (what `/tablets/load` must name). */
  tserverSession: string;
}

export const PROTOTYPE_NAMES = [
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__proto__',
  'prototype',
  'isPrototypeOf',
  '__defineGetter__',
];

const weird = fc.constantFrom(
  '',
  ' ',
  '.',
  '..',
  '../etc/passwd',
  'a/b',
  '/abs',
  'a\\b',
  '%2e%2e',
  'a\u0000b',
  '\u0000',
  'tåble',
  '表',
  '🙂',
  'a b',
  'A'.repeat(64),
  'A'.repeat(65),
  'x'.repeat(5_000),
  '-x',
  '1abc',
  'null',
  'undefined',
  'true',
  'NaN',
  '\ud800',
);

/** A name: one that exists, a fresh valid one, or anything else a client could send. */
export function nameArb(existing: string[]): fc.Arbitrary<string> {
  const fresh = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_.-]{0,12}$/).map((s) => `z${s}`);
  return fc.oneof(
    { weight: 4, arbitrary: existing.length > 0 ? fc.constantFrom(...existing) : fresh },
    { weight: 3, arbitrary: fresh },
    { weight: 2, arbitrary: fc.constantFrom(...PROTOTYPE_NAMES) },
    { weight: 2, arbitrary: weird },
    { weight: 1, arbitrary: fc.string({ maxLength: 80, unit: 'binary' }) },
  );
}

export const numberArb: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(0, 1, 2, 3, 8, -1, -0, 1.5, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, -1e308, 5e-324, 99_999),
  fc.integer({ min: -10, max: 100 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Any JSON value, small. */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}, '', 0, -1, 'x'.repeat(70_000)) },
);

/** A value of the wrong type (or of any type) for a field. */
export const wrongArb: fc.Arbitrary<unknown> = fc.oneof(
  anyJson,
  numberArb,
  weird,
  fc.constantFrom(...PROTOTYPE_NAMES),
);

/**
 * An object with the given fields, each usually its generated value, sometimes another value or missing,
 * sometimes with extra fields (named like prototype properties among others).
 */
export function fields(shape: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  const entries = Object.entries(shape).map(([key, arb]) =>
    fc
      .oneof(
        { weight: 8, arbitrary: arb.map((v) => ({ v })) },
        { weight: 1, arbitrary: wrongArb.map((v) => ({ v })) },
        { weight: 1, arbitrary: fc.constant(undefined) },
      )
      .map((r) => [key, r] as const),
  );
  const extra = fc.oneof(
    { weight: 6, arbitrary: fc.constant([] as [string, unknown][]) },
    {
      weight: 1,
      arbitrary: fc.array(
        fc.tuple(fc.oneof(fc.constantFrom(...PROTOTYPE_NAMES), fc.string({ maxLength: 10 })), anyJson),
        { maxLength: 3 },
      ),
    },
  );
  return fc.tuple(fc.tuple(...entries), extra).map(([values, extras]) => {
    // JSON.parse makes `__proto__` an own property: build the object the way the server will see it.
    const out: Record<string, unknown> = JSON.parse('{}') as Record<string, unknown>;
    for (const [key, r] of values) if (r) Object.defineProperty(out, key, own(r.v));
    for (const [key, v] of extras) Object.defineProperty(out, key, own(v));
    return out;
  });
}

function own(value: unknown): PropertyDescriptor {
  return { value, enumerable: true, writable: true, configurable: true };
}

/** Byte strings as the filters and rows take them: UTF-8, `{hex}` or `{base64}`, or anything. */
export const bytesArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom('', 'a', 'm', 'z', 'zz', '\u0000', 'é'),
  fc.string({ maxLength: 6 }),
  fc.stringMatching(/^([0-9a-f]{2}){0,4}$/).map((hex) => ({ hex })),
  fc.constantFrom(
    { hex: 'zz' },
    { hex: 'abc' },
    { base64: '!!' },
    { base64: 'AP8=' },
    { hex: 'ff', base64: 'AA==' },
  ),
);

/** A user compaction filter: one of the built-ins with plausible or broken options, or anything. */
export const filterArb: fc.Arbitrary<unknown> = fc.oneof(
  fields({
    name: fc.constantFrom('keepRowRange'),
    options: fields({
      start: bytesArb,
      end: bytesArb,
      startInclusive: fc.boolean(),
      endInclusive: fc.boolean(),
    }),
  }),
  fields({
    name: fc.constantFrom('dropRowPrefix', 'keepRowPrefix'),
    options: fields({ prefixes: fc.array(bytesArb, { maxLength: 3 }) }),
  }),
  fields({
    name: fc.constantFrom('dropFamily', 'keepFamily'),
    options: fields({ families: fc.array(bytesArb, { maxLength: 3 }) }),
  }),
  fields({ name: fc.oneof(fc.constantFrom(...PROTOTYPE_NAMES), weird), options: anyJson }),
);

/** A user compaction selector: one of the built-ins with plausible or broken figures, or anything. */
export const selectorArb: fc.Arbitrary<unknown> = fc.oneof(
  fields({ name: fc.constantFrom('all') }),
  fields({ name: fc.constantFrom('smaller-than'), bytes: numberArb }),
  fields({ name: fc.constantFrom('older-than'), ms: numberArb }),
  fields({ name: fc.constantFrom('deletes-above'), ratio: numberArb }),
  fields({ name: fc.oneof(fc.constantFrom(...PROTOTYPE_NAMES), weird), bytes: anyJson }),
);

/** A table config: plausible settings, broken ones, unknown keys. */
/** A table iterator: one of the built-ins with plausible or broken options, or anything. */
export const tableIteratorArb: fc.Arbitrary<unknown> = fc.oneof(
  fields({
    name: fc.constantFrom('c', 'sum-1', '', '-x', 'a'.repeat(70)),
    type: fc.constantFrom('sum', 'min', 'max', 'latest'),
    columns: fc.array(fields({ family: fc.constantFrom('count', '', 'n'), qualifier: fc.string() }), {
      maxLength: 2,
    }),
  }),
  fields({
    name: fc.constantFrom('f', 'g'),
    type: fc.constantFrom('dropFamily', 'dropQualifierPrefix', 'dropValuePrefix', 'ageOff', 'versions'),
    families: fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }),
    prefixes: fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }),
    ttlMs: numberArb,
    versions: numberArb,
  }),
  fields({
    name: fc.constantFrom('t'),
    type: fc.constantFrom('keepTimestamps'),
    from: numberArb,
    to: numberArb,
  }),
  fields({ name: fc.oneof(fc.constantFrom(...PROTOTYPE_NAMES), weird), type: anyJson }),
);

export function tableConfigArb(queues: string[]): fc.Arbitrary<unknown> {
  const route = fields({ queue: nameArb(queues), maxInputBytes: numberArb });
  return fc.oneof(
    { weight: 4, arbitrary: fields({ queues: fc.array(route, { maxLength: 3 }) }) },
    {
      weight: 3,
      arbitrary: fc.record(
        {
          queues: fc.array(route, { maxLength: 2 }),
          ratio: numberArb,
          maxFiles: numberArb,
          fileLimit: numberArb,
          versions: numberArb,
          ttlMs: numberArb,
          maxAttempts: numberArb,
          iterators: fc.oneof(fc.array(tableIteratorArb, { maxLength: 3 }), anyJson),
        },
        { requiredKeys: [] },
      ),
    },
    { weight: 1, arbitrary: anyJson },
  );
}

/** A compaction or request id: a ULID, or something that is not one. */
export const ulidArb: fc.Arbitrary<string> = fc.oneof(
  fc.ulid(),
  fc.constantFrom('01ARZ3NDEKTSV4RRFFQ69G5FAV', 'not-a-ulid', '', '0'.repeat(26), 'I'.repeat(26)),
  fc.string({ maxLength: 30 }),
);
