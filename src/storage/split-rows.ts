/**
 * Where to split a compaction job by row range (DESIGN.md, "Split jobs"): rows that cut its inputs into
 * shares of about equal bytes, read from the inputs' indexes alone (the last row and end of every data
 * block). Every bound is the smallest row after some block's last row, so a range never cuts a row: a
 * sub-job over [bound i-1, bound i) sees every version and delete marker of each of its cells.
 */
import { compareBytes } from './key.js';
import type { ObjectStore } from './object-store.js';
import { rowInRange, type RowRange } from './range.js';
import { RFileReader } from './rfile/reader.js';

/** Indexes read at once. */
const READ_AT_ONCE = 8;

/**
 * At most `parts - 1` rows, ascending, hex, that split `inputs` into `parts` shares of about equal bytes.
 * Fewer when the inputs have too few blocks (empty: the job cannot be split). With `rows`, only the blocks
 * whose last row is in them count (the inputs may hold rows of a tablet they are shared with), and every
 * bound is inside them.
 */
export async function splitRows(
  store: ObjectStore,
  inputs: readonly string[],
  parts: number,
  signal?: AbortSignal,
  rows?: RowRange,
): Promise<string[]> {
  // The inputs' indexes are read READ_AT_ONCE at a time: on an object store each is a few round trips,
  // and the reservation that asked for the bounds waits for them (a user job may have every file).
  const perInput = new Array<{ row: Buffer; bytes: number }[]>(inputs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < inputs.length) {
      const i = next++;
      const reader = await RFileReader.open(store, inputs[i]!, { signal });
      let previous = 0;
      perInput[i] = (await reader.blockEnds({ signal })).map(({ row, end }) => {
        const mark = { row, bytes: end - previous };
        previous = end;
        return mark;
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_AT_ONCE, inputs.length) }, worker));
  const marks = perInput.flat().filter((m) => rows === undefined || rowInRange(m.row, rows));
  return boundsAt(marks, parts).map((row) => row.toString('hex'));
}

/** What a tablet split reads of a file: its first and last rows, and each data block's last row and bytes. */
export interface FileProfile {
  firstRow: Buffer | null;
  lastRow: Buffer | null;
  blocks: { row: Buffer; bytes: number }[];
}

/** A file's profile, from its footer and index alone (about a thousandth of the file). */
export async function fileProfile(
  store: ObjectStore,
  name: string,
  signal?: AbortSignal,
): Promise<FileProfile> {
  const reader = await RFileReader.open(store, name, { signal });
  let previous = 0;
  const blocks = (await reader.blockEnds({ signal })).map(({ row, end }) => {
    const block = { row, bytes: end - previous };
    previous = end;
    return block;
  });
  const { firstKey, lastKey } = reader.summary;
  return {
    firstRow: firstKey ? Buffer.from(firstKey.row) : null,
    lastRow: lastKey ? Buffer.from(lastKey.row) : null,
    blocks,
  };
}

/** The bounds for `parts` shares of the blocks `marks` (pure: exported for its tests). */
export function boundsAt(marks: { row: Buffer; bytes: number }[], parts: number): Buffer[] {
  const sorted = [...marks].sort((a, b) => compareBytes(a.row, b.row));
  const total = sorted.reduce((n, m) => n + m.bytes, 0);
  const bounds: Buffer[] = [];
  let acc = 0;
  for (let i = 0; i < sorted.length - 1 && bounds.length < parts - 1; i++) {
    const m = sorted[i]!;
    acc += m.bytes;
    if (acc < ((bounds.length + 1) * total) / parts) continue;
    // The smallest row after this block's last row: that row stays whole on the left.
    const bound = Buffer.concat([m.row, Buffer.from([0])]);
    const last = bounds[bounds.length - 1];
    // A bound past the last block's row would leave the last share empty.
    if ((last === undefined || compareBytes(bound, last) > 0) && compareBytes(bound, sorted.at(-1)!.row) <= 0)
      bounds.push(bound);
  }
  return bounds;
}
