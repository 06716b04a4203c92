/**
 * The merge benchmark's table-iterator figures (issue 45): what a compaction costs with a `sum` combiner
 * and with filters, beside the plain compaction of the same files in the same rounds.
 *
 * The data set: K files of N counters each, every file holding every counter (a decimal value), each a
 * newer version than the file before: K × N entries in, N out. That is the case combiners exist for —
 * every file adds to every counter — and the one where they cost most (each output entry combines K).
 * The runs, alternated round after round so that all meet the same moments of the machine (each figure
 * the best of its rounds), all in memory in the run's codec:
 *   - plain: versions 1, the newest of each counter kept (native when the binding is built, as
 *     compactions run);
 *   - plain in JavaScript: the same through the JavaScript stack, which every job with table iterators
 *     runs — the baseline the iterators' own cost is read against;
 *   - sum: the counters summed (every live version read and added);
 *   - filters: dropFamily, dropQualifierPrefix, dropValuePrefix and an ageOff together, each dropping a
 *     part.
 */
import {
  compactFiles,
  MemoryObjectStore,
  writeRFile,
  type Compression,
  type Entry,
  type ObjectStore,
} from '../src/storage/index.js';
import { nativeMerge } from '../src/storage/native-merge.js';
import type { TableIterator } from '../src/table-iterators.js';
import { fileName } from './merge-data.js';
import { alternate } from './merge-measure.js';

const BASE_TS = 1_700_000_000_000;

export interface IteratorFigures {
  files: number;
  counters: number;
  entriesIn: number;
  /** Input entries per second of each run; each iterator run also as a ratio of the plain JavaScript one. */
  plain: { entriesPerS: number; native: boolean };
  plainJs: { entriesPerS: number };
  sum: { entriesPerS: number; vsPlainJs: number; vsPlain: number; entriesOut: number };
  filters: { entriesPerS: number; vsPlainJs: number; vsPlain: number; entriesOut: number };
}

function* countersOf(f: number, n: number): Generator<Entry> {
  for (let c = 0; c < n; c++)
    yield {
      key: {
        row: Buffer.from(`row${String(c).padStart(10, '0')}`),
        family: Buffer.from(`cf${c % 4}`),
        qualifier: Buffer.from(`cq${c % 16}`),
        timestamp: BASE_TS + f,
        deleted: false,
      },
      value: Buffer.from(String((c * 7919 + f * 104_729) % 1_000_000)),
    };
}

const SUM: TableIterator[] = [
  {
    name: 'sums',
    type: 'sum',
    columns: [{ family: 'cf0' }, { family: 'cf1' }, { family: 'cf2' }, { family: 'cf3' }],
  },
];
const FILTERS = (nowMs: number, files: number): TableIterator[] => [
  { name: 'f', type: 'dropFamily', families: ['cf3'] },
  { name: 'q', type: 'dropQualifierPrefix', prefixes: ['cq1'] },
  { name: 'v', type: 'dropValuePrefix', prefixes: ['9'] },
  // The older half of the versions of family cf1 aged off.
  { name: 'a', type: 'ageOff', families: ['cf1'], ttlMs: nowMs - (BASE_TS + Math.floor(files / 2)) },
];

export async function tableIteratorFigures(
  files: number,
  counters: number,
  codec: Compression,
  rounds: number,
  progress: (what: string) => void,
): Promise<IteratorFigures> {
  progress(`table iterators: ${files} files × ${counters} counters (${codec})`);
  const store = new MemoryObjectStore();
  const inputs: string[] = [];
  for (let f = 0; f < files; f++) {
    inputs.push(fileName(f));
    await writeRFile(store, fileName(f), countersOf(f, counters), { compression: codec });
  }
  const nowMs = BASE_TS + 86_400_000;
  const base = { versions: 1, nowMs, filters: [], dropDeletes: true };
  const run = (table: TableIterator[] | undefined, native: boolean) => async (): Promise<number> => {
    const result = await compactFiles({
      store,
      inputs,
      output: 'output/iterators.rf',
      settings: table ? { ...base, table } : base,
      compression: codec,
      nativeMerge: native,
    });
    await deleteQuietly(store, 'output/iterators.rf');
    return result.entriesWritten;
  };
  const native = nativeMerge() !== null;
  const plain = run(undefined, native);
  const plainJs = run(undefined, false);
  const sum = run(SUM, false);
  const filters = run(FILTERS(nowMs, files), false);
  const sumOut = await sum();
  const filtersOut = await filters();
  if ((await plain()) !== counters || (await plainJs()) !== counters || sumOut !== counters)
    throw new Error('a plain or summing compaction did not write one entry per counter');
  progress('table iterators: plain, plain in JavaScript, sum and filters, alternately');
  const [plainMs, plainJsMs, sumMs, filtersMs] = await alternate(rounds, [plain, plainJs, sum, filters]);
  const entriesIn = files * counters;
  const perS = (ms: number) => entriesIn / (ms / 1000);
  return {
    files,
    counters,
    entriesIn,
    plain: { entriesPerS: perS(plainMs!), native },
    plainJs: { entriesPerS: perS(plainJsMs!) },
    sum: {
      entriesPerS: perS(sumMs!),
      vsPlainJs: plainJsMs! / sumMs!,
      vsPlain: plainMs! / sumMs!,
      entriesOut: sumOut,
    },
    filters: {
      entriesPerS: perS(filtersMs!),
      vsPlainJs: plainJsMs! / filtersMs!,
      vsPlain: plainMs! / filtersMs!,
      entriesOut: filtersOut,
    },
  };
}

async function deleteQuietly(store: ObjectStore, name: string): Promise<void> {
  await store.delete(name).catch(() => undefined);
}
