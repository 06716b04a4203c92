/**
 * Tablet splits (DESIGN.md, "Tablet splits and merges"), as pure functions: the tablet, where to split it
 * and what its files hold in; one conditional change out. tablet-splits.ts is the I/O around them.
 *
 * 1. Where. A tablet splits at rows strictly inside its range. Split by itself (its data past the table's
 *    `splitThreshold`), it splits in two at the row nearest the middle of its bytes, estimated from its
 *    files' indexes (storage/split-rows.ts, fileProfile; storage/row-share.ts spreads each block's bytes
 *    over the rows it may hold): never a row that is already a split point, and no data is read.
 * 2. Daughters. Tablet (p, e] split at r1 < … < rk becomes (p, r1], (r1, r2], …, (rk, e]. The last keeps
 *    the tablet's row (its end row is the same): its compactors, which know the tablet by that row, go on
 *    reporting and committing there. The others are new rows, hosted at once by the same server. Files
 *    are shared, never rewritten: each daughter references every file that may hold one of its rows (by
 *    the file's first and last row), with its share of the file's bytes and entries estimated from the
 *    file's index, and reads only its own rows (rows.ts).
 * 3. What goes where.
 *    - Reservations, split jobs and kept checkpoints stay in the last daughter, with their inputs. Each
 *      was reserved for rows that cover every daughter, so what it writes is good for all of them.
 *    - Every other daughter gets a hold on each reservation (meta/holds.ts): the inputs it shares stay
 *      out of its own jobs, and the output takes their place when the reservation commits
 *      (hold-rules.ts). A sub-job of a split job gets none: its output is only its share of the rows,
 *      installed by the split's last commit in the last daughter only. The other daughters compact those
 *      files themselves.
 *    - A hold the tablet had goes to every daughter that has some of its inputs.
 *    - User compaction requests go to every daughter (a request asked for all of the tablet's rows), and
 *      so does the selection, with the daughter's files. The change is conditional on each request still
 *      being in the tablet's row — an admin cancels one there without the tablet server (the manager's
 *      cancel then finds the daughters that split off before it, and cancels them too) — and on the
 *      manager having asked for no request the copy has not seen (`requests`, meta/tablet.ts).
 *    - Failure records stay in the last daughter: the others try those files again, as their own rows.
 *    - The tablet's clock and its ingest ids go to every daughter.
 * 4. The change is one mutation: the tablet's row rewritten as the last daughter, conditional on its
 *    location and version (added by the shell, as for every change), and each new row written whole,
 *    conditional on the row not existing. No reservation is cancelled, nothing waits for a compaction.
 */
import { ingestRecordValue, ingestRow } from '../meta/ingest-ids.js';
import { shareFigures } from '../meta/file-stats.js';
import { holdCol, type Hold } from '../meta/holds.js';
import { tabletRow, type EndRow } from '../meta/keys.js';
import { ALL_ROWS, coversRows, tabletRows, type HexRange } from '../meta/rows.js';
import {
  COL_LOC,
  COL_PREV,
  COL_REQUESTS,
  COL_SELECTED,
  COL_TIME,
  compactCol,
  fileCol,
  locationValue,
  prevValue,
  type FileMeta,
  type Location,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Cell, Condition } from '../meta/types.js';
import { bytesWithin, compareBytes, middleOf, rowSpans, type FileProfile } from '../storage/index.js';
import type { RuleChange } from './rule-change.js';

/** The split points that can split `meta`: strictly inside its rows, ascending, each once. */
export function usableSplitRows(meta: Pick<TabletMeta, 'prevEndRow' | 'endRow'>, rows: Buffer[]): Buffer[] {
  const inside = rows.filter(
    (r) =>
      (meta.prevEndRow === null || compareBytes(r, meta.prevEndRow) > 0) &&
      (meta.endRow === null || compareBytes(r, meta.endRow) < 0),
  );
  const sorted = [...inside].sort(compareBytes);
  return sorted.filter((r, i) => i === 0 || compareBytes(r, sorted[i - 1]!) !== 0);
}

/**
 * Where a tablet splits by itself (rule 1): the row nearest the middle of its files' bytes within its rows,
 * among the blocks' last rows and the files' first rows; undefined when no such row is strictly inside
 * them with bytes on both sides (one row, say).
 */
export function middleRow(
  meta: Pick<TabletMeta, 'prevEndRow' | 'endRow'>,
  profiles: Iterable<FileProfile>,
): Buffer | undefined {
  const spans = [...profiles].flatMap(rowSpans);
  const row = middleOf(spans, { lo: meta.prevEndRow, hi: meta.endRow });
  return row && usableSplitRows(meta, [Buffer.from(row)])[0];
}

/**
 * A file's share of each daughter (rule 2): the fraction of its bytes in the tablet that each daughter's
 * rows are estimated to hold (storage/row-share.ts); null where the file holds none of the daughter's rows
 * (by its first and last row). Without a profile (the file could not be read), an equal share each.
 */
export function fileShares(
  profile: FileProfile | undefined,
  daughters: readonly { prev: EndRow; end: EndRow }[],
): (number | null)[] {
  if (!profile || profile.firstRow === null || profile.lastRow === null) {
    return daughters.map(() => 1 / daughters.length);
  }
  const { firstRow, lastRow } = profile;
  const present = daughters.map(
    (d) =>
      (d.prev === null || compareBytes(lastRow, d.prev) > 0) &&
      (d.end === null || compareBytes(firstRow, d.end) <= 0),
  );
  const spans = rowSpans(profile);
  const bytes = daughters.map((d) =>
    spans.reduce((n, s) => n + bytesWithin(s, { lo: d.prev, hi: d.end }), 0),
  );
  const total = bytes.reduce((n, x, i) => n + (present[i] ? x : 0), 0);
  const count = present.filter(Boolean).length;
  return present.map((p, i) => (!p ? null : total > 0 ? bytes[i]! / total : 1 / count));
}

export interface TabletSplit {
  /** The new tablets, lowest first; the last daughter is the tablet itself (`apply` makes it so). */
  daughters: TabletMeta[];
  /** The change of the tablet's row, with every new row's cells. */
  change: RuleChange & { deleteRows: string[] };
}

/**
 * The split of `meta` at `rows` (usable: {@link usableSplitRows}, at least one), with the files' profiles
 * (a missing one shares its file equally), by the server `me` at `now` (rules 2–4).
 */
export function decideTabletSplit(
  meta: TabletMeta,
  rows: readonly Buffer[],
  profiles: ReadonlyMap<string, FileProfile>,
  ctx: { me: Location; now: number },
): TabletSplit {
  const ranges = [meta.prevEndRow, ...rows].map((prev, i) => ({
    prev,
    end: i < rows.length ? rows[i]! : meta.endRow,
  }));
  const last = ranges.length - 1;
  // Inputs of what stays in the last daughter stay its files, whatever the estimate says.
  const pinned = new Set<string>();
  for (const r of meta.reservations.values()) for (const f of r.inputs) pinned.add(f);
  for (const s of meta.splits.values()) for (const f of s.inputs) pinned.add(f);
  for (const k of meta.resumes.values()) for (const f of k.inputs) pinned.add(f);

  const files = ranges.map(() => new Map<string, FileMeta>());
  for (const [name, file] of meta.files) {
    const shares = fileShares(profiles.get(name), ranges);
    shares.forEach((share, i) => {
      const kept = share ?? (i === last && pinned.has(name) ? 0 : null);
      if (kept === null) return;
      files[i]!.set(name, shareFigures(file, kept));
    });
  }
  const bytesOf = (names: readonly string[], of: ReadonlyMap<string, FileMeta>): number =>
    names.reduce((n, f) => n + (of.get(f)?.size ?? 0), 0);

  const holds = ranges.map((range, i) => {
    const out = new Map<string, Hold>();
    const mine = files[i]!;
    const rowsHere = tabletRows(range.prev, range.end);
    // The tablet's own holds, to every daughter with some of their inputs.
    for (const [ecid, h] of meta.holds) {
      const inputs = h.inputs.filter((f) => mine.has(f));
      if (inputs.length === 0 || !coversRows(h.clip, rowsHere)) continue;
      const share = h.share * ratio(bytesOf(inputs, mine), bytesOf(h.inputs, meta.files));
      out.set(ecid, { ...h, inputs, share });
    }
    if (i === last) return out;
    for (const [ecid, r] of meta.reservations) {
      if (r.split) continue; // a sub-job's output is its share only: the split installs it in the last
      const inputs = r.inputs.filter((f) => mine.has(f));
      const clip: HexRange = r.clip ?? ALL_ROWS;
      if (inputs.length === 0 || !coversRows(clip, rowsHere)) continue;
      out.set(ecid, {
        tablet: meta.row,
        inputs,
        output: r.output,
        kind: r.kind,
        ...(r.userCompactionIds ? { userCompactionIds: r.userCompactionIds } : {}),
        clip,
        nowMs: r.settings.nowMs,
        share: ratio(bytesOf(inputs, mine), bytesOf(r.inputs, meta.files)),
        at: ctx.now,
      });
    }
    return out;
  });

  const daughters: TabletMeta[] = ranges.slice(0, last).map((range, i) => {
    const mine = files[i]!;
    return {
      row: tabletRow(meta.tableId, range.end),
      tableId: meta.tableId,
      endRow: range.end,
      prevEndRow: range.prev,
      loc: ctx.me,
      files: mine,
      reservations: new Map(),
      userCompactions: new Map(meta.userCompactions),
      ...(meta.requests === undefined ? {} : { requests: meta.requests }),
      ...(meta.selection ? { selection: selectionFor(meta.selection, mine) } : {}),
      failures: new Map(),
      resumes: new Map(),
      splits: new Map(),
      holds: holds[i]!,
      progress: new Map(),
      queued: new Map(),
      ingests: new Map(meta.ingests),
      time: meta.time,
      version: 0,
    };
  });

  const conditions: Condition[] = [
    ...daughters.map((d) => ({ op: 'noColumnWithPrefix' as const, row: d.row, prefix: '' })),
    ...[...meta.userCompactions.keys()].map((id) => ({
      op: 'present' as const,
      row: meta.row,
      col: compactCol(id),
    })),
    requestsSeen(meta),
  ];
  const puts: Cell[] = daughters.flatMap((d) => rowCells(d));
  const deleteRows = daughters.map((d) => ingestRow(d.row));
  // The tablet's own row becomes the last daughter's.
  const { row } = meta;
  const lastFiles = files[last]!;
  const lastHolds = holds[last]!;
  const lastSelection = meta.selection && selectionFor(meta.selection, lastFiles);
  const deletes: { row: string; col: string }[] = [];
  const newPrev = rows[rows.length - 1]!;
  puts.push({ row, col: COL_PREV, value: prevValue(newPrev) });
  for (const name of meta.files.keys()) {
    const kept = lastFiles.get(name);
    if (kept) puts.push({ row, col: fileCol(name), value: JSON.stringify(kept) });
    else deletes.push({ row, col: fileCol(name) });
  }
  for (const ecid of meta.holds.keys()) {
    const kept = lastHolds.get(ecid);
    if (kept) puts.push({ row, col: holdCol(ecid), value: JSON.stringify(kept) });
    else deletes.push({ row, col: holdCol(ecid) });
  }
  if (lastSelection) puts.push({ row, col: COL_SELECTED, value: JSON.stringify(lastSelection) });
  return {
    daughters,
    change: {
      conditions,
      puts,
      deletes,
      deleteRows,
      apply: (m) => {
        m.prevEndRow = newPrev;
        m.files = new Map(lastFiles);
        m.holds = new Map(lastHolds);
        if (lastSelection) m.selection = lastSelection;
      },
    },
  };
}

/**
 * The condition that the manager asked the tablet for no user compaction its copy has not seen: it writes
 * the request's id in `requests` with every request, and a new row made from a copy without it would
 * never get it (its rows never rewritten, though the request's status would end).
 */
export function requestsSeen(meta: Pick<TabletMeta, 'row' | 'requests'>): Condition {
  return meta.requests === undefined
    ? { op: 'absent', row: meta.row, col: COL_REQUESTS }
    : { op: 'equals', row: meta.row, col: COL_REQUESTS, value: meta.requests };
}

/** A fraction in (0, 1]: `part` of `whole` (a whole of nothing is all of it). */
function ratio(part: number, whole: number): number {
  if (whole <= 0) return 1;
  return Math.min(1, Math.max(1e-9, part / whole));
}

function selectionFor(selection: NonNullable<TabletMeta['selection']>, files: ReadonlyMap<string, FileMeta>) {
  return { ...selection, files: selection.files.filter((f) => files.has(f)) };
}

/** Every cell of a new daughter's row, and of its ingest ids' row. */
function rowCells(d: TabletMeta): Cell[] {
  const { row } = d;
  const cells: Cell[] = [
    { row, col: COL_PREV, value: prevValue(d.prevEndRow) },
    { row, col: COL_LOC, value: locationValue(d.loc!) },
  ];
  if (d.time > 0) cells.push({ row, col: COL_TIME, value: String(d.time) });
  if (d.requests !== undefined) cells.push({ row, col: COL_REQUESTS, value: d.requests });
  for (const [name, f] of d.files) cells.push({ row, col: fileCol(name), value: JSON.stringify(f) });
  for (const [ecid, h] of d.holds) cells.push({ row, col: holdCol(ecid), value: JSON.stringify(h) });
  for (const [id, c] of d.userCompactions) cells.push({ row, col: compactCol(id), value: JSON.stringify(c) });
  if (d.selection) cells.push({ row, col: COL_SELECTED, value: JSON.stringify(d.selection) });
  const ids = ingestRow(row);
  for (const [id, record] of d.ingests) cells.push({ row: ids, col: id, value: ingestRecordValue(record) });
  return cells;
}
