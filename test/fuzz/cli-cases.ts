/**
 * Every `excompact admin` command, `scan` and `ingest`, with generated arguments: names that exist, fresh
 * ones and bad ones, plausible and broken option values, unknown options; `ingest` reads generated NDJSON,
 * good lines and bad ones (its input is validated whole first, so a refusal writes nothing). (No NUL in
 * argv: no process can be given one there.)
 */
import fc from 'fast-check';
import { nameArb, type Known } from './inputs.js';

export interface CliCase {
  /** `admin queue create`: the command, for the figures. */
  command: string;
  args: string[];
  /** What the command reads on its standard input (`ingest`). */
  input?: string;
}

const noNul = (s: string): string => s.split(String.fromCharCode(0)).join('0');

function arg(existing: string[]): fc.Arbitrary<string> {
  return nameArb(existing)
    .map(noNul)
    .filter((s) => s.length < 2_000);
}

const value = fc
  .oneof(
    fc.constantFrom(
      '0',
      '1',
      '2',
      '-1',
      '64',
      '1e9',
      'x',
      '',
      '1.5',
      '99999999999',
      '7d',
      '30m',
      '1G',
      '64M',
    ),
    fc.string({ maxLength: 8 }),
  )
  .map(noNul);

const setting = fc
  .oneof(
    fc
      .tuple(
        fc.constantFrom(
          'queues',
          'ratio',
          'maxFiles',
          'fileLimit',
          'versions',
          'ttl',
          'ttlMs',
          'maxAttempts',
        ),
        value,
      )
      .map(([k, v]) => `${k}=${v}`),
    fc.constantFrom(
      'queues=constructor',
      'queues=toString:64M,q1',
      'constructor=1',
      '__proto__=1',
      'noequals',
      '=x',
    ),
  )
  .map(noNul);

/** An NDJSON line for `ingest`: entries it takes, and every way of getting one wrong. */
const ndjsonLine = fc.oneof(
  fc
    .record(
      {
        row: fc.string({ maxLength: 8 }),
        cf: fc.string({ maxLength: 4 }),
        value: fc.string({ maxLength: 8 }),
        ts: fc.oneof(fc.nat(), fc.integer(), fc.double()),
        delete: fc.boolean(),
      },
      { requiredKeys: ['row'] },
    )
    .map((e) => JSON.stringify(e)),
  fc.constantFrom(
    '{"row":"a","value":"1"}',
    '{"row":"b","delete":true}',
    '{"row":"","value":"x"}',
    '{"row":"YQ==","value":"YR==","encoding":"base64"}',
    '{"row":"YQ","encoding":"base64"}',
    '{"row":"a","encoding":"hex"}',
    '{"row":"a","ts":1e30}',
    '{"row":"\\ud800"}',
    '{"value":"no row"}',
    '{"row":"a","extra":1}',
    '{"row":"a","__proto__":{"row":"b"}}',
    '{"row":["a"]}',
    'not json',
    '[]',
    'null',
    '',
    `{"row":"a","cq":"${'q'.repeat(70_000)}"}`,
  ),
);

const opt = (flag: string, v: fc.Arbitrary<string>): fc.Arbitrary<string[]> =>
  fc.option(v, { nil: undefined }).map((x) => (x === undefined ? [] : [flag, x]));

export function cliCaseArb(k: Known): fc.Arbitrary<CliCase> {
  const table = arg(k.tables);
  const queue = arg(k.queues);
  const c = (command: string, parts: fc.Arbitrary<string[]>[]): fc.Arbitrary<CliCase> =>
    fc.tuple(...parts).map((p) => ({ command, args: [...command.split(' '), ...p.flat()] }));
  const one = (a: fc.Arbitrary<string>): fc.Arbitrary<string[]> => a.map((x) => [x]);
  const filter = fc
    .oneof(
      fc.constantFrom(
        'keepRowRange:{"start":"z","end":"a"}',
        'keepRowRange:{"start":"a","end":"z"}',
        'dropRowPrefix:{"prefixes":[""]}',
        'dropRowPrefix:{"prefixes":["tmp_"]}',
        'constructor:{}',
        'keepRowRange:not json',
        'nocolon',
      ),
      fc.string({ maxLength: 20 }),
    )
    .map(noNul);
  const row = fc.oneof(value, fc.constantFrom('0x', '0xzz', '0x0', '0x00ff', '0xFF', 'a', 'zzz', '\u00e9'));
  return fc.oneof(
    c('scan', [one(table), opt('--start', row), opt('--end', row), opt('--limit', value)]),
    fc
      .tuple(
        c('ingest', [one(table), opt('--batch-id', value), opt('--skip-batches', value)]),
        fc.array(ndjsonLine, { maxLength: 5 }),
      )
      .map(([cmd, lines]) => ({ ...cmd, input: lines.map((l) => `${l}\n`).join('') })),
    c('admin queue create', [one(queue), opt('--bins', value), fc.constantFrom([], ['--if-not-exists'])]),
    c('admin queue list', [fc.constantFrom([], ['--json'])]),
    c('admin queue info', [one(queue)]),
    c('admin queue delete', [one(queue), fc.constantFrom([], ['--force'])]),
    c('admin table create', [
      one(table),
      opt('--split', value),
      opt('--splits', value),
      opt('--config', setting),
      fc.constantFrom([], ['--if-not-exists']),
    ]),
    c('admin table list', [fc.constantFrom([], ['--json'])]),
    c('admin table info', [one(table)]),
    c('admin table config', [one(table), fc.array(setting, { minLength: 0, maxLength: 3 })]),
    c('admin table delete', [one(table)]),
    c('admin table summaries', [one(table), opt('--start', value), opt('--end', value)]),
    c('admin table iterator add', [
      one(table),
      one(fc.constantFrom('c', 'x', '')),
      one(
        fc.oneof(
          fc.constantFrom(
            '{"type":"sum","columns":[{"family":"count"}]}',
            '{"type":"dropValuePrefix","prefixes":["zz"]}',
            '{"type":"nope"}',
            '[]',
            'not json',
          ),
          value,
        ),
      ),
    ]),
    c('admin table iterator list', [one(table)]),
    c('admin table iterator remove', [one(table), one(fc.constantFrom('c', 'x', ''))]),
    c('admin table compact', [
      one(table),
      opt('--start', value),
      opt('--end', value),
      opt('--filter', filter),
      opt(
        '--select',
        fc.oneof(
          fc.constantFrom('all', 'smaller-than:64M', 'older-than:7d', 'deletes-above:0.2', 'deletes-above:2'),
          value,
        ),
      ),
    ]),
    c('admin compactors list', [opt('--queue', queue)]),
    c('admin compactions list', [
      opt('--queue', queue),
      opt('--table', table),
      opt('--state', fc.constantFrom('running', 'parked', 'x')),
    ]),
    c('admin compactions history', [
      opt('--since', value),
      opt('--table', table),
      opt('--queue', queue),
      opt('--outcome', fc.constantFrom('committed', 'cancelled', 'x')),
      opt('--limit', value),
    ]),
    c('admin compactions cancel', [one(fc.oneof(fc.ulid(), value))]),
    c('admin compactions status', [one(fc.oneof(fc.ulid(), value)), fc.constantFrom([], ['--json'])]),
    c('admin compactions release', [fc.oneof(one(fc.oneof(fc.ulid(), value)), opt('--table', table))]),
    c('admin check', [fc.constantFrom([], ['--json'])]),
    c('admin queue create', [
      one(queue),
      fc.constantFrom(['--bogus'], ['--bins'], ['--bins', '3', '--bins', 'x']),
    ]),
  );
}
