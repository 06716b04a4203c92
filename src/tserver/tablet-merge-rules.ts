/**
 * Tablet merges (DESIGN.md, "Tablet merges"), as pure functions: consecutive tablets of one table, all
 * hosted by this server and quiet, in; the merged tablet and one conditional change out.
 * tablet-merges.ts is the I/O around them (it gathers the tablets quiet first: no reservation, split job
 * or hold left).
 *
 * 1. Blockers. Tablets merge only when they are at least two, of one table, each starting where the one
 *    before ends, none with a reservation, a split job, a kept checkpoint or a hold, and all with the same
 *    user compaction requests (a request asked of some of them only would be applied to rows nobody
 *    asked to rewrite).
 * 2. The merged tablet keeps the last tablet's row (its end row is the same) and starts where the first
 *    starts. Files are shared, never rewritten: each file is read, in the merged tablet, in the rows of
 *    the tablets that referenced it — its fence (meta/tablet.ts), joined where they touch, left out when
 *    it covers the merged tablet's rows or holds no row outside it (by its first and last row). Sizes,
 *    entries and deletes add up, timestamps span both (meta/file-stats.ts). The requests stay, their
 *    selections go (the merged tablet selects again, by the requests' selectors); failure records go.
 *    Ingest records join: a record of a whole batch becomes the rows of the tablet it came from
 *    (meta/ingest-ids.ts). The clock is the latest.
 * 3. The change is one mutation, conditional on every tablet's location and version: the last tablet's
 *    row rewritten as the merged one, the other rows deleted with their ingest ids and queue entries.
 */
import { ingestRecordValue, ingestRow, type IngestRecord } from '../meta/ingest-ids.js';
import {
  ALL_ROWS,
  coversRows,
  intersectRows,
  isEmptyRange,
  joinRows,
  rowInRows,
  type HexRange,
} from '../meta/rows.js';
import { addFigures } from '../meta/file-stats.js';
import { holdCol } from '../meta/holds.js';
import { delRow } from '../meta/keys.js';
import {
  COL_LOC,
  COL_PREV,
  COL_SELECTED,
  COL_VERSION,
  COL_TIME,
  failedCol,
  fileCol,
  locationValue,
  resumeCol,
  splitCol,
  prevValue,
  rowsOf,
  type FileMeta,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Cell, Condition } from '../meta/types.js';
import type { FileProfile } from '../storage/index.js';
import type { RuleChange } from './rule-change.js';
import { requestsSeen } from './tablet-split-rules.js';

/** Why `tablets` (in row order) cannot merge now; undefined when they can (rule 1). */
export function mergeBlocker(tablets: readonly TabletMeta[]): string | undefined {
  if (tablets.length < 2) return 'fewer than two tablets';
  const first = tablets[0]!;
  for (let i = 0; i < tablets.length; i++) {
    const t = tablets[i]!;
    if (t.tableId !== first.tableId) return `tablet ${t.row} is of another table`;
    if (i > 0) {
      const before = tablets[i - 1]!.endRow;
      if (before === null || t.prevEndRow === null || !t.prevEndRow.equals(before))
        return `tablet ${t.row} does not start where ${tablets[i - 1]!.row} ends`;
    }
    if (t.reservations.size > 0) return `tablet ${t.row} has running compactions`;
    if (t.splits.size > 0) return `tablet ${t.row} has a split job under way`;
    if (t.resumes.size > 0) return `tablet ${t.row} keeps a checkpoint for a job to resume`;
    if (t.holds.size > 0) return `tablet ${t.row} holds files for a compaction of another tablet`;
  }
  const ids = (t: TabletMeta) => [...t.userCompactions.keys()].sort().join(',');
  const want = ids(first);
  const other = tablets.find((t) => ids(t) !== want);
  if (other) {
    const all = new Set(tablets.flatMap((t) => [...t.userCompactions.keys()]));
    const partial = [...all].find((id) => tablets.some((t) => !t.userCompactions.has(id)));
    return `user compaction ${partial ?? '?'} is pending on only some of the tablets: wait for it or cancel it`;
  }
  return undefined;
}

/**
 * What a tablet about to merge lets go of once its wait is over (rule 1 for what is left): its split jobs
 * (the outputs of the sub-jobs done are marked for the collector: nothing of them is installed), its
 * kept checkpoints (their parts marked), its holds (the files are its own again). Undefined: nothing.
 * Its reservations are cancelled before, one by one, by the reservations shell.
 */
export function letGoForMerge(meta: TabletMeta, now: number): RuleChange | undefined {
  const { row } = meta;
  const marks = [
    ...[...meta.splits.values()].flatMap((s) => s.done.flatMap((d) => (d?.output ? [d.output] : []))),
    ...[...meta.resumes.values()].flatMap((k) => k.checkpoint.parts.map((p) => p.name)),
  ];
  const deletes = [
    ...[...meta.splits.keys()].map((id) => ({ row, col: splitCol(id) })),
    ...[...meta.resumes.keys()].map((k) => ({ row, col: resumeCol(k) })),
    ...[...meta.holds.keys()].map((ecid) => ({ row, col: holdCol(ecid) })),
  ];
  if (deletes.length === 0) return undefined;
  return {
    conditions: [],
    puts: marks.map((f) => ({ row: delRow(f), col: 'at', value: String(now) })),
    deletes,
    apply: (m) => {
      m.splits.clear();
      m.resumes.clear();
      m.holds.clear();
    },
  };
}

export interface TabletMerge {
  merged: TabletMeta;
  change: RuleChange & { deleteRows: string[] };
}

/**
 * The merge of `tablets` (no {@link mergeBlocker}), with the profiles of their files where known (a file
 * without one keeps its fence).
 */
export function decideTabletMerge(
  tablets: readonly TabletMeta[],
  profiles: ReadonlyMap<string, FileProfile>,
  now: number,
): TabletMerge {
  const first = tablets[0]!;
  const last = tablets[tablets.length - 1]!;
  const mergedRows = { ...rowsOf({ prevEndRow: first.prevEndRow, endRow: last.endRow }) };
  const spans = new Map<string, { file: FileMeta; rows: HexRange[] }>();
  for (const t of tablets) {
    const mine = rowsOf(t);
    for (const [name, f] of t.files) {
      const read = (f.fence ?? [ALL_ROWS]).map((r) => intersectRows(r, mine)).filter((r) => !isEmptyRange(r));
      const seen = spans.get(name);
      if (!seen) {
        spans.set(name, { file: { ...f }, rows: read });
        continue;
      }
      seen.file = addFigures(seen.file, f);
      if (seen.file.group !== f.group) delete seen.file.group;
      seen.rows.push(...read);
    }
  }
  const files = new Map<string, FileMeta>();
  for (const [name, { file, rows }] of spans) {
    const { fence: _fence, ...rest } = file;
    const joined = joinRows(rows);
    const whole = joined.length === 1 && coversRows(joined[0]!, mergedRows);
    const profile = profiles.get(name);
    const inside =
      profile !== undefined &&
      profile.firstRow !== null &&
      profile.lastRow !== null &&
      joined.some((r) => rowInRows(profile.firstRow!, r) && rowInRows(profile.lastRow!, r));
    // A file none of whose rows any tablet read (a fence outside its tablet) is not the merged tablet's.
    if (joined.length === 0) continue;
    files.set(name, whole || inside ? rest : { ...rest, fence: joined });
  }
  const dropped = [...spans.keys()].filter((name) => !files.has(name));
  const ingests = joinIngests(tablets);
  const merged: TabletMeta = {
    ...last,
    prevEndRow: first.prevEndRow,
    files,
    userCompactions: new Map(last.userCompactions),
    failures: new Map(),
    ingests,
    time: Math.max(...tablets.map((t) => t.time)),
  };
  delete merged.selection;

  const { row } = last;
  const others = tablets.slice(0, -1);
  // Every tablet: no user compaction asked of it that its copy has not seen (a row deleted here would
  // take the request with it; see tablet-split-rules.ts, requestsSeen).
  const conditions: Condition[] = tablets.map((t) => requestsSeen(t));
  conditions.push(
    ...others.flatMap((t) => [
      t.loc
        ? { op: 'equals' as const, row: t.row, col: COL_LOC, value: locationValue(t.loc) }
        : { op: 'absent' as const, row: t.row, col: COL_LOC },
      t.version === 0
        ? { op: 'absent' as const, row: t.row, col: COL_VERSION }
        : { op: 'equals' as const, row: t.row, col: COL_VERSION, value: String(t.version) },
    ]),
  );
  const puts: Cell[] = [
    { row, col: COL_PREV, value: prevValue(first.prevEndRow) },
    ...[...files].map(([name, f]) => ({ row, col: fileCol(name), value: JSON.stringify(f) })),
    ...(merged.time > last.time ? [{ row, col: COL_TIME, value: String(merged.time) }] : []),
    ...dropped.map((f) => ({ row: delRow(f), col: 'at', value: String(now) })),
  ];
  for (const [id, record] of ingests) {
    const before = last.ingests.get(id);
    if (!before || ingestRecordValue(before) !== ingestRecordValue(record))
      puts.push({ row: ingestRow(row), col: id, value: ingestRecordValue(record) });
  }
  const deletes = [
    ...[...last.files.keys()].filter((f) => !files.has(f)).map((f) => ({ row, col: fileCol(f) })),
    ...(last.selection ? [{ row, col: COL_SELECTED }] : []),
    ...[...last.failures.keys()].map((k) => ({ row, col: failedCol(k) })),
  ];
  const deleteRows = others.flatMap((t) => [t.row, ingestRow(t.row), ...t.queued.values()]);
  return {
    merged,
    change: {
      conditions,
      puts,
      deletes,
      deleteRows,
      apply: (m) => {
        m.prevEndRow = merged.prevEndRow;
        m.files = new Map(files);
        m.failures = new Map();
        m.ingests = new Map(ingests);
        m.time = merged.time;
        delete m.selection;
      },
    },
  };
}

/**
 * The merged tablet's ingest records: per batch, every rows range the tablets recorded, a whole record
 * becoming the rows of its tablet — unless every tablet applied the whole batch, which stays whole.
 */
function joinIngests(tablets: readonly TabletMeta[]): Map<string, IngestRecord> {
  const out = new Map<string, IngestRecord>();
  const ids = new Set(tablets.flatMap((t) => [...t.ingests.keys()]));
  for (const id of ids) {
    const records = tablets.map((t) => [t, t.ingests.get(id)] as const);
    const at = Math.min(...records.flatMap(([, r]) => (r ? [r.at] : [])));
    if (records.every(([, r]) => r !== undefined && r.rows === undefined)) {
      out.set(id, { at });
      continue;
    }
    const rows = records.flatMap(([t, r]) => (!r ? [] : (r.rows ?? [rowsOf(t)])));
    out.set(id, { at, rows });
  }
  // Kept oldest first, as a tablet's are (ingest-ids.ts, expiredIngests).
  return new Map([...out].sort((a, b) => a[1].at - b[1].at));
}
