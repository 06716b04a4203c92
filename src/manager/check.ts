/**
 * The consistency check (`excompact admin check`, `GET /v1/check`): what DESIGN.md's invariants say must
 * hold, judged against one snapshot of a live cluster. A pure function from what was read — metadata rows,
 * live compactor nodes, the object store's listing — to named problem lists; check-read.ts does the
 * reading, in an order that keeps false alarms momentary (see there).
 *
 * Problems, most serious first:
 *   missingFiles               a file some tablet references is not in the object store: data loss
 *   tabletCoverage             a table's tablets do not cover its rows exactly once: a gap (rows no tablet
 *                              holds) or an overlap (rows two tablets hold), by their previous end rows
 *   sharedInputs               a file in two live reservations of a tablet (other than sub-jobs of one split)
 *                              or in a reservation and a split job it is not a sub-job of, or an input of
 *                              a reservation or split job that is not the tablet's file (invariant 3)
 *   selectionConflicts         a system job over files both in and outside a user compaction's selection
 *                              (one reserved before the selection has all its inputs in it, one after
 *                              none), or with filters; a user job whose requests are pending over other
 *                              files or filters than its selection's, or with none; a selected file the
 *                              tablet does not have (invariant 7)
 *   deadCompactorReservations  a reservation names a compactor whose node is gone (invariant 2)
 *   queueEntriesWithoutWork    a `~cq` entry whose hosted tablet has no work for that queue, or that names
 *                              no tablet at all (invariant 5)
 *   workMissingFromQueue       a hosted tablet with work for an existing queue has no entry in it (5)
 *   orphanFiles                an object nothing references, with no `~del` row, older than the GC grace
 *                              and the wait for the collector's next sweep: a sweep should have removed it (4)
 *   staleTemporaries           a temporary of an unfinished write (a local temporary file, an incomplete S3
 *                              multipart upload) older than the GC grace and the wait for the next sweep
 *   malformedRows              a metadata row that does not parse
 *   badDeletionMarks           a `~del` row the collector cannot act on (a name no store accepts, a file
 *                              outside `tables/`, a mangled time): it skips it, so it is never collected
 * and, not failures, what a healthy busy cluster also has:
 *   referencedDeletionMarks    a `~del` row naming a file a tablet still references: a file shared after a
 *                              split that one daughter compacted away; the collector keeps it until no
 *                              tablet references it (invariant 4)
 *   unreferencedPendingGc      unreferenced objects with a `~del` row: the collector will delete them
 *   unreferencedYoung          unreferenced objects younger than the grace: maybe a write in flight
 *   awaitingSweep              unreferenced objects past the grace, within the wait for the next sweep
 *   youngTemporaries           temporaries younger than that, or of an output a reservation is writing:
 *                              writes in progress, or awaiting the sweep
 */
import { isDeepStrictEqual } from 'node:util';
import { parseQueueRow, queueEntryTablet } from '../meta/keys.js';
import type { CheckReport as GenericCheckReport, ProblemList, Severity } from '../meta/check-view.js';
import type { Reservation, TabletMeta } from '../meta/tablet.js';
import { satisfiedBy } from '../queue/selection.js';
import { tabletDemand } from '../queue/tablet-plan.js';
import { checkFiles, checkMarks, checkTemporaries, referencedFiles } from './check-files.js';
import { isNotCheckable, type CheckInput, type Items } from './check-input.js';

export type { CheckInput, NotCheckable } from './check-input.js';

/** Items kept per problem; `count` says how many there are in all. */
export const MAX_ITEMS = 100;

export const PROBLEMS = {
  missingFiles: ['referenced files missing from the object store', 'critical'],
  tabletCoverage: ['tables whose tablets do not cover their rows exactly once', 'critical'],
  deadCompactorReservations: ['reservations naming dead compactors', 'error'],
  sharedInputs: ["files in two jobs at once, or jobs' inputs the tablet does not have", 'critical'],
  selectionConflicts: [
    "user compactions' selections shared with system jobs, or unlike their user jobs",
    'critical',
  ],
  queueEntriesWithoutWork: ['queue entries without work', 'error'],
  workMissingFromQueue: ['work missing from the queue', 'error'],
  orphanFiles: ['unreferenced files older than the GC grace, not marked for deletion', 'error'],
  staleTemporaries: ['temporaries of unfinished writes older than the GC grace', 'error'],
  malformedRows: ['metadata rows that do not parse', 'error'],
  badDeletionMarks: ['deletion marks the garbage collector cannot act on (skipped)', 'error'],
  referencedDeletionMarks: [
    'deletion marks naming a file a tablet still references (shared: kept until none does)',
    'info',
  ],
  unreferencedPendingGc: ['unreferenced files marked for deletion (pending GC)', 'info'],
  unreferencedYoung: ['unreferenced files younger than the GC grace (maybe in flight)', 'info'],
  awaitingSweep: ["unreferenced files past the GC grace, awaiting the collector's next sweep", 'info'],
  youngTemporaries: ['temporaries of writes in progress, or awaiting the next sweep', 'info'],
} as const satisfies Record<string, readonly [string, Severity]>;

export type ProblemName = keyof typeof PROBLEMS;

export type CheckReport = GenericCheckReport<ProblemName>;

export const RACE_NOTE =
  'The check reads a live cluster: a commit between its reads can show a problem for a moment. ' +
  'Confirm a problem with a second run before acting on it.';

type Found = Record<ProblemName, Items>;

export function checkCluster(input: CheckInput): CheckReport {
  const found: Found = {
    ...checkCoverage(input),
    ...checkReservations(input),
    ...checkSelections(input),
    ...checkQueues(input),
    ...checkFiles(input),
    ...checkTemporaries(input),
    malformedRows: [...(input.malformed ?? [])].map(([row, error]) => ({ row, error })),
    ...checkMarks(input),
  };
  const problems = {} as Record<ProblemName, ProblemList>;
  for (const name of Object.keys(PROBLEMS) as ProblemName[]) {
    const [title, severity] = PROBLEMS[name];
    const items = found[name];
    problems[name] = Array.isArray(items)
      ? { title, severity, count: items.length, items: items.slice(0, MAX_ITEMS) }
      : { title, severity, count: null, items: [], notCheckable: items.notCheckable };
  }
  const objects = isNotCheckable(input.objects) ? undefined : [...input.objects.values()];
  return {
    ok: Object.values(problems).every((p) => p.severity === 'info' || !p.count),
    checkedAt: input.now,
    problems,
    figures: {
      tablets: input.tablets.length,
      hostedTablets: input.tablets.filter((t) => t.loc).length,
      reservations: input.tablets.reduce((n, t) => n + t.reservations.size, 0),
      queueEntries: input.queueEntries.length,
      deletionMarks: input.deletions.size,
      files: referencedFiles(input.tablets).size,
      objects: objects?.length ?? null,
      objectBytes: objects?.reduce((n, o) => n + o.size, 0) ?? null,
      temporaries: isNotCheckable(input.temporaries) ? null : input.temporaries.length,
      queues: input.queues.length,
      liveCompactors: input.liveCompactors.size,
      graceMs: input.graceMs,
    },
    note: RACE_NOTE,
  };
}

function checkReservations(input: CheckInput): Pick<Found, 'deadCompactorReservations' | 'sharedInputs'> {
  const dead = [];
  const shared: Record<string, unknown>[] = [];
  for (const t of input.tablets) {
    // Each file's jobs: a reservation's ecid, or `split:<id>` (its sub-jobs are the split's, not others').
    const jobs = new Map<string, string[]>();
    const take = (file: string, job: string): void => {
      if (!t.files.has(file)) shared.push({ tablet: t.row, file, job, problem: 'not a file of the tablet' });
      jobs.set(file, [...(jobs.get(file) ?? []), job]);
    };
    for (const [id, split] of t.splits) for (const file of split.inputs) take(file, `split:${id}`);
    for (const [ecid, hold] of t.holds) for (const file of hold.inputs) take(file, `hold:${ecid}`);
    for (const [ecid, r] of t.reservations) {
      if (r.split) {
        if (!t.splits.has(r.split.id))
          shared.push({ tablet: t.row, job: ecid, problem: `sub-job of split ${r.split.id}, which is gone` });
        continue; // its inputs are its split's
      }
      for (const file of r.inputs) take(file, ecid);
    }
    for (const [file, names] of jobs)
      if (names.length > 1) shared.push({ tablet: t.row, file, jobs: names, problem: 'in two jobs' });
    for (const [ecid, r] of t.reservations) {
      if (input.liveCompactors.has(r.compactor)) continue;
      dead.push({
        tablet: t.row,
        ecid,
        compactor: r.compactor,
        queueId: r.queueId,
        reservedAt: r.reservedAt,
      });
    }
  }
  return { deadCompactorReservations: dead, sharedInputs: shared };
}

/**
 * Every table's tablets, in row order, must chain: the first starts at the table's first row (no previous
 * end row), each starts where the one before ends, and the last is unbounded. A split or merge changes
 * them in one mutation, so a snapshot never shows one half done.
 */
function checkCoverage(input: CheckInput): Pick<Found, 'tabletCoverage'> {
  const out: Record<string, unknown>[] = [];
  const byTable = new Map<string, TabletMeta[]>();
  for (const t of input.tablets) {
    const list = byTable.get(t.tableId);
    if (list) list.push(t);
    else byTable.set(t.tableId, [t]);
  }
  const hex = (row: Buffer | null) => (row === null ? null : row.toString('hex'));
  for (const [tableId, tablets] of byTable) {
    // Rows sort like the tablets' end rows, the unbounded last one after all others (meta/keys.ts).
    const sorted = [...tablets].sort((a, b) => (a.row < b.row ? -1 : a.row > b.row ? 1 : 0));
    let expected: string | null = null;
    for (const t of sorted) {
      const prev = hex(t.prevEndRow);
      if (prev !== expected) {
        const gap = expected === null || (prev !== null && prev > expected);
        out.push({
          table: tableId,
          tablet: t.row,
          prevEndRowHex: prev,
          expectedHex: expected,
          problem: gap ? 'rows before it are in no tablet' : 'its rows overlap the tablet before it',
        });
      }
      expected = hex(t.endRow);
    }
    if (sorted.at(-1)?.endRow !== null) {
      out.push({
        table: tableId,
        tablet: sorted.at(-1)?.row ?? null,
        problem: 'no tablet holds the last rows',
      });
    }
  }
  return { tabletCoverage: out };
}

/** What the selection check needs of a job: a reservation's, or a split job's (its sub-jobs' together). */
type SelectionJob = Pick<Reservation, 'inputs' | 'kind' | 'settings' | 'userCompactionIds'> & {
  userCompactionId?: string;
};

/**
 * Invariant 7: a user compaction's selection and a system job's inputs share no file, except those of a
 * system job reserved before the selection was made; a user job rewrites exactly its selection. The
 * selection takes every file the tablet has when it is made, so a system job reserved before it has all
 * its inputs in it (they stay the tablet's files until its commit puts its output in their place, in the
 * same mutation), and one reserved after it has none (the planner keeps selected files out). Which of the
 * two a job whose inputs are all selected is cannot be told from the rows; a job with some of each is
 * neither. A user job is reserved with its selection written as exactly its inputs and filters, and the
 * selection then changes only by losing cancelled requests (its files stay) or with the job's own end.
 *
 * Everything judged here is in one tablet row, which every change rewrites in one mutation: the snapshot
 * shows each row as a whole change left it, never half a commit. A user job none of whose requests is left
 * (an admin cancelled them) is being cancelled by its tablet server, and the next selection may already
 * be made without it: it is not judged, nor a split of such a job whose sub-jobs are still running.
 */
function checkSelections(input: CheckInput): Pick<Found, 'selectionConflicts'> {
  const out: Record<string, unknown>[] = [];
  for (const t of input.tablets) {
    const selection = t.selection;
    const selected = new Set(selection?.files ?? []);
    for (const file of selected)
      if (!t.files.has(file))
        out.push({ tablet: t.row, file, problem: 'selected, not a file of the tablet' });
    // Each job once: a split job as itself (its sub-jobs' inputs are its own), every other reservation.
    const jobs: [string, SelectionJob][] = [
      ...[...t.splits].map(([id, split]): [string, SelectionJob] => [`split:${id}`, split]),
      ...[...t.reservations].filter(([, r]) => !r.split),
    ];
    for (const [job, r] of jobs) {
      if (r.kind === 'system') {
        const inSelection = r.inputs.filter((f) => selected.has(f));
        if (inSelection.length > 0 && inSelection.length < r.inputs.length)
          out.push({
            tablet: t.row,
            job,
            files: inSelection,
            problem: 'system job over selected and unselected files',
          });
        if (r.settings.filters.length > 0)
          out.push({ tablet: t.row, job, problem: "system job with a user compaction's filters" });
        continue;
      }
      if (!satisfiedBy(r).some((id) => t.userCompactions.has(id))) continue; // being cancelled
      if (!selection) {
        out.push({ tablet: t.row, job, problem: 'user job without a selection' });
        continue;
      }
      const inputs = new Set(r.inputs);
      const differ = [
        ...r.inputs.filter((f) => !selected.has(f)),
        ...selection.files.filter((f) => !inputs.has(f)),
      ];
      if (differ.length > 0)
        out.push({
          tablet: t.row,
          job,
          files: differ.sort(),
          problem: 'user job over files other than its selection',
        });
      if (!isDeepStrictEqual(r.settings.filters, selection.filters))
        out.push({ tablet: t.row, job, problem: "user job with filters other than its selection's" });
    }
  }
  return { selectionConflicts: out };
}

function checkQueues(input: CheckInput): Pick<Found, 'queueEntriesWithoutWork' | 'workMissingFromQueue'> {
  const byRow = new Map(input.tablets.map((t) => [t.row, t]));
  const demand = new Map<string, Map<string, number>>();
  // An unhosted tablet is not judged: its next host plans it again and rewrites its entries.
  for (const t of input.tablets) {
    if (!t.loc) continue;
    const config = input.tableConfigs.get(t.tableId);
    demand.set(t.row, config ? tabletDemand(t, config, input.queues) : new Map<string, number>());
  }
  const withoutWork = [];
  const present = new Set<string>();
  for (const entry of input.queueEntries) {
    let tablet: string;
    let queueId: string;
    try {
      const e = parseQueueRow(entry);
      tablet = queueEntryTablet(e);
      queueId = e.queueId;
    } catch {
      withoutWork.push({ entry, tablet: null, queueId: null, reason: 'not a queue entry row' });
      continue;
    }
    present.add(`${queueId} ${tablet}`);
    const wants = demand.get(tablet); // undefined for an unhosted tablet
    if (!byRow.has(tablet)) {
      withoutWork.push({ entry, tablet, queueId, reason: 'no such tablet' });
    } else if (wants && !wants.has(queueId)) {
      withoutWork.push({ entry, tablet, queueId, reason: 'the tablet has no work for this queue' });
    }
  }
  const queueNames = new Map(input.queues.map((q) => [q.id, q.name]));
  const missing = [];
  for (const [tablet, wants] of demand) {
    for (const [queueId, priority] of wants) {
      if (present.has(`${queueId} ${tablet}`)) continue;
      missing.push({ tablet, queueId, queue: queueNames.get(queueId) ?? null, priority });
    }
  }
  return { queueEntriesWithoutWork: withoutWork, workMissingFromQueue: missing };
}
