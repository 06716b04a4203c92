/**
 * Table iterators (src/storage/iterators/table-iterators.ts) through histories of writes, partial
 * compactions (any subset of a tablet's files, delete markers kept), full compactions (all files,
 * markers dropped) and the clock moving on: after every step a scan of the current files equals the
 * model's scan, and a partial compaction's output equals the model's, with every live put of a combined
 * cell still there uncombined.
 *
 * Timestamps grow with every write step, as the tablet's time assigns them (HostedTablet.nextTimestamp):
 * a step's entries share one timestamp, greater than every earlier step's. So a delete never falls
 * between puts that a full compaction has already combined, and for combined cells the scan equals the
 * model over the whole history.
 *
 * The model, per cell (row, family, qualifier), written apart from src/storage: the live puts are those
 * newer than the cell's newest delete marker. A combined cell (family count: sum; family max,
 * qualifier a: max) is, in a scan or a full compaction, one entry with the newest live put's key and the
 * sum or largest of the live values that are decimal integers (the newest value when none is), dropped
 * when an age-off of its family drops its newest put; a partial compaction keeps its live puts as they
 * are. Any other cell keeps one put per timestamp (the smallest value), the newest 2 of family data and
 * the newest 1 of the others, then drops aged-off puts and values starting with "zz". A partial
 * compaction keeps the newest marker. A full compaction forgets the markers and what the rules dropped,
 * so the model's tablet becomes the model's scan (as in compaction.property.test.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compactFiles,
  MemoryObjectStore,
  RFileReader,
  scanFiles,
  writeRFile,
  type Entry,
  type IteratorSettings,
} from '../../src/storage/index.js';
import type { TableIterator } from '../../src/table-iterators.js';
import { collect } from '../support/entries.js';
import { runs, sorted } from './arbitraries.js';
import { modelSort } from './model.js';

const ROWS = ['r0', 'r1', 'r2', 'r3'];
const FAMILIES = ['count', 'max', 'tmp', 'data'];
const QUALIFIERS = ['a', 'b'];

/** The cells the table's combiners `c` and `m` combine. */
const isCombinedColumn = (family: string, qualifier: string): boolean =>
  family === 'count' || (family === 'max' && qualifier === 'a');

/** An entry of a write step, before the step's timestamp is given to it. */
interface Written {
  row: string;
  family: string;
  qualifier: string;
  deleted: boolean;
  value: string;
}

type Step =
  | { kind: 'write'; entries: Written[] }
  | { kind: 'partial'; pick: number[] }
  | { kind: 'full' }
  | { kind: 'tick'; ms: number };

interface Table {
  /** The table's iterators, in the order the table lists them (the order must not matter). */
  iterators: TableIterator[];
  /** The `ageOff` among them, if any. */
  ageOff: { families: string[]; ttlMs: number } | undefined;
}

const BASE: TableIterator[] = [
  { name: 'c', type: 'sum', columns: [{ family: 'count' }] },
  { name: 'm', type: 'max', columns: [{ family: 'max', qualifier: 'a' }] },
  { name: 'd', type: 'dropValuePrefix', prefixes: ['zz'] },
  { name: 'v', type: 'versions', families: ['data'], versions: 2 },
];

const tableArb = (ageOff: boolean): fc.Arbitrary<Table> =>
  (ageOff
    ? fc.record({
        families: fc.constantFrom<string[]>(['tmp'], ['tmp', 'count'], ['tmp', 'max']),
        ttlMs: fc.integer({ min: 1, max: 25 }),
      })
    : fc.constant(undefined)
  ).chain((a) => {
    const list: TableIterator[] =
      a === undefined ? BASE : [...BASE, { name: 'o', type: 'ageOff', families: a.families, ttlMs: a.ttlMs }];
    return fc
      .shuffledSubarray(list, { minLength: list.length })
      .map((iterators) => ({ iterators, ageOff: a }));
  });

/** Mostly integers (some beyond 2^53), sometimes a value that is none. */
const numberArb = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: -40, max: 40 }).map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: -(10n ** 25n), max: 10n ** 25n }).map(String) },
  { weight: 2, arbitrary: fc.constantFrom('x', '', 'zz', 'zz5', '1.5') },
);
const textArb = fc.constantFrom('', 'v', 'w', 'z', 'zv', 'zz', 'zzz', '7');

/**
 * `plainZz` false: no cell that is not combined gets a value the value filter drops (see "known bug"
 * below); combined cells get such values either way (the filter must not apply to them).
 */
const writtenArb = (plainZz: boolean): fc.Arbitrary<Written> =>
  fc
    .record({
      row: fc.constantFrom(...ROWS),
      family: fc.constantFrom(...FAMILIES),
      qualifier: fc.constantFrom(...QUALIFIERS),
      // About one entry in five is a delete marker.
      deleted: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
    })
    .chain((k) => {
      if (k.deleted) return fc.constant({ ...k, value: '' });
      const values = k.family === 'count' || k.family === 'max' ? numberArb : textArb;
      const plain = !isCombinedColumn(k.family, k.qualifier);
      return (plainZz || !plain ? values : values.filter((v) => !v.startsWith('zz'))).map((value) => ({
        ...k,
        value,
      }));
    });

const stepArb = (plainZz: boolean): fc.Arbitrary<Step> =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('write' as const),
        entries: fc.array(writtenArb(plainZz), { minLength: 1, maxLength: 8 }),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('partial' as const),
        pick: fc.uniqueArray(fc.nat(7), { minLength: 1, maxLength: 4 }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('full' as const) }) },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 8 }) }),
    },
  );

const stepsArb = (plainZz = false): fc.Arbitrary<Step[]> =>
  fc.array(stepArb(plainZz), { minLength: 1, maxLength: 30, size: 'medium' });

// ---- The model ----

const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;
const text = (b: Buffer): string => b.toString('utf8');
const cellOf = (e: Entry): string => `${text(e.key.row)}|${text(e.key.family)}|${text(e.key.qualifier)}`;

function combinerOf(e: Entry): 'sum' | 'max' | null {
  const family = text(e.key.family);
  if (!isCombinedColumn(family, text(e.key.qualifier))) return null;
  return family === 'count' ? 'sum' : 'max';
}

const isCombined = (e: Entry): boolean => combinerOf(e) !== null;

/** What a scan (dropDeletes) or a compaction of `entries` keeps under the table's iterators. */
function modelRun(entries: readonly Entry[], table: Table, nowMs: number, dropDeletes: boolean): Entry[] {
  const all = modelSort(entries);
  const out: Entry[] = [];
  for (let i = 0; i < all.length;) {
    let j = i;
    while (j < all.length && cellOf(all[j]!) === cellOf(all[i]!)) j++;
    const group = all.slice(i, j);
    i = j;
    const first = group[0]!;
    const deletes = group.filter((e) => e.key.deleted);
    const newestDelete = Math.max(-1, ...deletes.map((d) => d.key.timestamp));
    // Newest first; equal keys by value.
    const live = group.filter((e) => !e.key.deleted && e.key.timestamp > newestDelete);
    const family = text(first.key.family);
    const cutoff = table.ageOff?.families.includes(family) ? nowMs - table.ageOff.ttlMs : -Infinity;
    const op = combinerOf(first);
    if (op !== null) {
      if (!dropDeletes) out.push(...live);
      else if (live.length > 0 && live[0]!.key.timestamp >= cutoff) {
        const ints = live.map((e) => e.value.toString('latin1')).filter((v) => INTEGER.test(v));
        const value =
          ints.length === 0
            ? live[0]!.value
            : Buffer.from(
                ints
                  .map((v) => BigInt(v))
                  .reduce((a, b) => (op === 'sum' ? a + b : a > b ? a : b))
                  .toString(),
              );
        out.push({ key: { ...live[0]!.key }, value });
      }
    } else {
      const versions = family === 'data' ? 2 : 1;
      const oneEach = live.filter((e, k) => k === 0 || live[k - 1]!.key.timestamp !== e.key.timestamp);
      out.push(
        ...oneEach
          .slice(0, versions)
          .filter((e) => e.key.timestamp >= cutoff)
          .filter((e) => !e.value.toString('latin1').startsWith('zz')),
      );
    }
    if (!dropDeletes && deletes.length > 0) out.push(deletes[0]!);
  }
  return out;
}

/** One readable line per entry. */
const show = (entries: readonly Entry[]): string[] =>
  entries.map((e) => `${cellOf(e)}|${e.key.timestamp}|${e.key.deleted ? 'DEL' : 'put'}|${text(e.value)}`);

// ---- Playing a history ----

interface PlayOptions {
  /** Check a partial compaction's output entry by entry, not only that it combined nothing. Default true. */
  partialOutput?: boolean;
  /** Play a broken compactor that runs partial compactions without the table's iterators. */
  partialWithoutTable?: boolean;
}

async function play(table: Table, steps: Step[], options: PlayOptions = {}): Promise<void> {
  const store = new MemoryObjectStore();
  /** The current files and what each holds. */
  const files = new Map<string, Entry[]>();
  /** The model's tablet: what was written, and after a full compaction the model's scan of it. */
  let tablet: Entry[] = [];
  /** Everything ever written: the combined cells' scan over it does not depend on compactions. */
  const history: Entry[] = [];
  let now = 20;
  let lastTs = 0;
  let seq = 0;
  // The whole history decides a combined cell unless an age-off of it has dropped puts in a full
  // compaction that a later, newer put would otherwise have brought back into the sum.
  const historyDecidesCombined = !(table.ageOff?.families.some((f) => f === 'count' || f === 'max') ?? false);
  const settings = (dropDeletes: boolean, withTable = true): IteratorSettings => ({
    versions: 1,
    nowMs: now,
    filters: [],
    dropDeletes,
    ...(withTable ? { table: table.iterators } : {}),
  });

  const compact = async (inputs: string[], dropDeletes: boolean, step: number): Promise<void> => {
    const output = `t/c${seq++}.rf`;
    const where = `step ${step}, compaction of ${inputs.join(', ')} into ${output}`;
    const read = inputs.flatMap((f) => files.get(f)!);
    const result = await compactFiles({
      store,
      inputs,
      output,
      settings: settings(dropDeletes, dropDeletes || options.partialWithoutTable !== true),
      blockSize: 48,
    });
    const written = result.empty ? [] : await collect((await RFileReader.open(store, output)).scan());
    if (result.empty) expect(await store.stat(output), where).toBeNull();
    if (!dropDeletes) {
      // A partial compaction never combines: a marker in a file it did not read may hide some puts.
      const livePuts = modelRun(read, table, now, false).filter((e) => isCombined(e) && !e.key.deleted);
      expect(
        written.filter((e) => isCombined(e) && !e.key.deleted).length,
        `${where}: puts of combined cells in the output`,
      ).toBe(livePuts.length);
      if (options.partialOutput !== false)
        expect(show(written), `${where}: the output`).toEqual(show(modelRun(read, table, now, false)));
    }
    for (const f of inputs) {
      files.delete(f);
      await store.delete(f);
    }
    if (!result.empty) files.set(output, written);
  };

  for (const [i, step] of steps.entries()) {
    if (step.kind === 'write') {
      lastTs = Math.max(lastTs + 1, now);
      const entries = step.entries.map((w): Entry => ({
        key: {
          row: Buffer.from(w.row),
          family: Buffer.from(w.family),
          qualifier: Buffer.from(w.qualifier),
          timestamp: lastTs,
          deleted: w.deleted,
        },
        value: Buffer.from(w.value),
      }));
      const name = `t/w${seq++}.rf`;
      await writeRFile(store, name, sorted(entries), { blockSize: 48 });
      files.set(name, sorted(entries));
      tablet.push(...entries);
      history.push(...entries);
    } else if (step.kind === 'partial' && files.size > 0) {
      const names = [...files.keys()];
      await compact([...new Set(step.pick.map((p) => names[p % names.length]!))], false, i);
    } else if (step.kind === 'full' && files.size > 0) {
      await compact([...files.keys()], true, i);
      tablet = modelRun(tablet, table, now, true);
    } else if (step.kind === 'tick') {
      now += step.ms;
    }
    const where = `after step ${i} (${step.kind}), now ${now}, files ${[...files.keys()].join(', ')}`;
    const got = await collect(scanFiles({ store, files: [...files.keys()], settings: settings(true) }));
    expect(show(got), where).toEqual(show(modelRun(tablet, table, now, true)));
    if (historyDecidesCombined) {
      expect(show(got.filter(isCombined)), `${where}: combined cells over the whole history`).toEqual(
        show(modelRun(history, table, now, true).filter(isCombined)),
      );
    }
  }
}

describe('table iterators - compaction sequences', () => {
  it('combiners, versions and the value filter: scans equal the model after any sequence of compactions', async () => {
    await fc.assert(
      fc.asyncProperty(tableArb(false), stepsArb(), (table, steps) => play(table, steps)),
      { numRuns: runs(200) },
    );
  });

  it('with an age-off and the clock moving on: scans equal the model after any sequence of compactions', async () => {
    await fc.assert(
      fc.asyncProperty(tableArb(true), stepsArb(), (table, steps) => play(table, steps)),
      { numRuns: runs(150) },
    );
  });

  it('the property has teeth: a compactor that runs partial compactions without the table iterators is caught', async () => {
    const result = await fc.check(
      fc.asyncProperty(tableArb(false), stepsArb(), (table, steps) =>
        play(table, steps, { partialWithoutTable: true }),
      ),
      { numRuns: runs(200), seed: 42 },
    );
    expect(result.failed).toBe(true);
  });

  // Known bug (as of this test): the value filter drops a put after versioning, in partial compactions
  // too. A partial compaction of the file holding a cell's newest put alone, whose value the filter
  // drops, drops that put, and the older version in another file shows again.
  it('the value filter on cells not combined: a partial compaction does not change the scan', async () => {
    await fc.assert(
      fc.asyncProperty(tableArb(true), stepsArb(true), (table, steps) =>
        play(table, steps, { partialOutput: false }),
      ),
      { numRuns: runs(200) },
    );
  });

  it('example - a partial compaction of a filtered newest version alone does not bring back the one before', async () => {
    const put = (value: string): Written => ({
      row: 'r0',
      family: 'tmp',
      qualifier: 'a',
      deleted: false,
      value,
    });
    await play(
      { iterators: BASE, ageOff: undefined },
      [
        { kind: 'write', entries: [put('old')] },
        { kind: 'write', entries: [put('zz')] },
        { kind: 'partial', pick: [1] },
      ],
      { partialOutput: false },
    );
  });
});
