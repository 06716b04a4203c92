/**
 * User compactions: which requests a tablet's next user compaction satisfies and which files it rewrites
 * (DESIGN.md, "The life of a compaction"). Pure logic over the tablet's metadata; the tablet server applies
 * the step with every change it plans, so a request is selected as soon as the tablet sees it.
 *
 * - Coalescing. A request asks for the data the tablet held when it was made to be rewritten through its
 *   filters. Consecutive pending requests (oldest first) with the same filters and queue are satisfied by
 *   one rewrite; a request with others waits for the ones before it (each runs once, in order). A request
 *   with a queue (`--queue`) sends its job there whatever its size.
 * - Selection. The selection takes every file the tablet has (so the requests' data is all in it, and
 *   every file outside it is newer), or with selectors (`--select`, meta/selectors.ts) the files they
 *   choose, with every input of a running job that holds one of them (its output takes their place). A
 *   selection of selectors never grows, and requests coalesce only with requests of the same selectors
 *   (the newest one's time is their reference: a superset of what each chose). It is made at once, even
 *   while system jobs hold some of the files:
 *   the user job waits for those, and their outputs take their place in the selection. System jobs go on
 *   over the files outside it, so a tablet under ingest never waits for a user compaction.
 * - Joining. A request that arrives while the selection's job has not started, with the same filters as
 *   the selection and no request of other filters before it, joins it: the selection grows to every
 *   file, which is only possible while no system job holds a file outside it (its output would carry
 *   data the request asked to rewrite, outside the selection). Otherwise it waits for the next rewrite.
 *   A selection that grows is a new job: the old one's failure record (a parked job is tried again, as
 *   the new request asks) and kept checkpoint go.
 * - Completion. The user job's commit ends the requests it satisfies and the selection (rules.ts, with
 *   {@link selectionAfterCommit}, which also puts a pre-selection system job's output in the selection). A
 *   selection left with no file (a tablet whose data all compacted away, or a tablet without files)
 *   satisfies its requests at once.
 * - Cancellation. An admin cancels a request by deleting its `compact:<id>` (the manager writes only
 *   that). The next step drops it from the selection; a selection left with no request is dropped with
 *   the failure record of its job (a parked user job does not hold its files out of system work any
 *   more), and the tablet server cancels a running user job none of whose requests is left
 *   ({@link abandonedUserJobs}). A split user job (tserver/split-rules.ts) none of whose requests is left
 *   is abandoned likewise: its running sub-jobs are cancelled, the others are not planned, and the first
 *   step after the last of them ended drops the split, its failure record, and marks the outputs of the
 *   sub-jobs done for the collector. Nothing of a cancelled rewrite is installed.
 */
import { isDeepStrictEqual } from 'node:util';
import { delRow } from '../meta/keys.js';
import {
  COL_SELECTED,
  compactCol,
  failedCol,
  failureKey,
  resumeCol,
  splitCol,
  type Reservation,
  type Selection,
  type SplitJob,
  type TabletMeta,
  type UserCompaction,
} from '../meta/tablet.js';
import { chooseFiles, type Selector } from '../meta/selectors.js';
import type { Cell } from '../meta/types.js';

/** What the step changes: the selection cell, the requests it completes, and the same on a copy. */
export interface UserStep {
  puts: Cell[];
  deletes: { row: string; col: string }[];
  apply: (meta: TabletMeta) => void;
  /** The user compactions completed. */
  finished: string[];
}

/**
 * The next selection and the requests completed, or undefined when nothing changes. `now` is when the
 * outputs of a dropped split stopped being referenced (their deletion marks).
 */
export function userStep(meta: TabletMeta, now: number): UserStep | undefined {
  let selection = meta.selection;
  // Requests cancelled since the selection was made leave it; with none left, so does the selection.
  let dropped: Selection | undefined;
  if (selection?.ids.some((id) => !meta.userCompactions.has(id))) {
    const ids = selection.ids.filter((id) => meta.userCompactions.has(id));
    if (ids.length === 0) dropped = selection;
    selection = ids.length === 0 ? undefined : { ...selection, ids };
  }
  // Its job's failure record goes with a dropped selection, so a parked user job frees its files, and so
  // does its kept checkpoint (resume-rules.ts): no later request may go on from a cancelled rewrite.
  const failure = dropped && failureKey(dropped.files);
  const moot = new Set(failure !== undefined && meta.failures.has(failure) ? [failure] : []);
  const keptUser = failure !== undefined && meta.resumes.get(failure)?.kind === 'user' ? [failure] : [];
  // Abandoned user splits none of whose sub-jobs runs any more go, with their failure records.
  const drops = droppedSplits(meta);
  for (const [, s] of drops) if (meta.failures.has(failureKey(s.inputs))) moot.add(failureKey(s.inputs));
  const doneOutputs = drops.flatMap(([, s]) => s.done.flatMap((d) => (d?.output ? [d.output] : [])));
  const finished: string[] = [];
  const pending = () =>
    [...meta.userCompactions]
      .filter(([id]) => !selection?.ids.includes(id) && !finished.includes(id))
      .sort(([a, x], [b, y]) => x.requestedAt - y.requestedAt || (a < b ? -1 : a > b ? 1 : 0));
  /** The oldest pending requests with the same filters, queue and selectors as the oldest. */
  const nextRun = () => {
    const [first, ...rest] = pending();
    if (!first) return undefined;
    const run = [first];
    for (const next of rest) {
      if (!sameKind(next[1], first[1])) break;
      run.push(next);
    }
    const { queue, select } = first[1];
    return {
      ids: run.map(([id]) => id),
      filters: first[1].filters,
      ...(queue ? { queue } : {}),
      ...(select ? { select } : {}),
      requestedAt: Math.max(...run.map(([, u]) => u.requestedAt)),
    };
  };
  const allFiles = [...meta.files.keys()].sort();
  // Each round selects a run of requests or completes a selection without files: at most two per request.
  for (let guard = 0; guard <= 2 * meta.userCompactions.size + 1; guard++) {
    if (selection && selection.files.length === 0) {
      finished.push(...selection.ids);
      selection = undefined;
      continue;
    }
    const run = nextRun();
    if (!run) break;
    if (!selection) {
      selection = {
        ids: run.ids,
        files: run.select ? chosenFiles(meta, run.select, run.requestedAt) : allFiles,
        filters: run.filters,
        ...(run.queue ? { queue: run.queue } : {}),
        ...(run.select ? { select: run.select } : {}),
      };
      continue;
    }
    if (canJoin(meta, selection, run.filters) && run.queue === selection.queue && !run.select) {
      // A job over other files from now on: the failure record and the kept checkpoint of the job over
      // the old ones go with them (left, a parked record showed a job that runs again, and an admin's
      // cancel of it was refused as a system job's).
      const before = failureKey(selection.files);
      if (before !== failureKey(allFiles)) {
        if (meta.failures.has(before)) moot.add(before);
        if (meta.resumes.get(before)?.kind === 'user') keptUser.push(before);
      }
      selection = {
        ids: [...selection.ids, ...run.ids],
        files: allFiles,
        filters: selection.filters,
        ...(selection.queue ? { queue: selection.queue } : {}),
      };
    }
    break;
  }
  if (
    finished.length === 0 &&
    drops.length === 0 &&
    keptUser.length === 0 &&
    isDeepStrictEqual(selection, meta.selection)
  ) {
    return undefined;
  }
  const { row } = meta;
  const result = selection;
  return {
    puts: [
      ...(result ? [{ row, col: COL_SELECTED, value: JSON.stringify(result) }] : []),
      ...doneOutputs.map((f) => ({ row: delRow(f), col: 'at', value: String(now) })),
    ],
    deletes: [
      ...(result || !meta.selection ? [] : [{ row, col: COL_SELECTED }]),
      ...finished.map((id) => ({ row, col: compactCol(id) })),
      ...[...moot].map((k) => ({ row, col: failedCol(k) })),
      ...drops.map(([id]) => ({ row, col: splitCol(id) })),
      ...keptUser.map((k) => ({ row, col: resumeCol(k) })),
    ],
    apply: (m) => {
      for (const id of finished) m.userCompactions.delete(id);
      for (const k of moot) m.failures.delete(k);
      for (const [id] of drops) m.splits.delete(id);
      for (const k of keptUser) m.resumes.delete(k);
      if (result) m.selection = result;
      else delete m.selection;
    },
    finished,
  };
}

/** Whether two requests are satisfied by one rewrite: the same filters, queue and selectors. */
function sameKind(a: UserCompaction, b: UserCompaction): boolean {
  return (
    isDeepStrictEqual(a.filters, b.filters) && a.queue === b.queue && isDeepStrictEqual(a.select, b.select)
  );
}

/**
 * The files `select` chooses (meta/selectors.ts), with every input of a job that holds one of them: a
 * running job's inputs are all in the selection or all outside it, so that its output takes their place
 * in it or stays out (selectionAfterCommit; a system job never runs over selected files).
 */
function chosenFiles(meta: TabletMeta, select: Selector[], requestedAt: number): string[] {
  const chosen = new Set(chooseFiles(meta.files, select, requestedAt));
  const jobs = [
    ...[...meta.reservations.values()].map((r) => r.inputs),
    ...[...meta.splits.values()].map((s) => s.inputs),
    ...[...meta.holds.values()].map((h) => h.inputs),
  ];
  for (let grew = true; grew;) {
    grew = false;
    for (const inputs of jobs) {
      if (!inputs.some((f) => chosen.has(f))) continue;
      for (const f of inputs) {
        if (chosen.has(f) || !meta.files.has(f)) continue;
        chosen.add(f);
        grew = true;
      }
    }
  }
  return [...chosen].sort();
}

/** Whether requests with `filters` can join `selection` now (see the module comment). */
function canJoin(meta: TabletMeta, selection: Selection, filters: Selection['filters']): boolean {
  if (!isDeepStrictEqual(filters, selection.filters)) return false;
  // A selector's selection is its files only: grown to every file, it would rewrite what none asked for.
  if (selection.select) return false;
  const selected = new Set(selection.files);
  for (const r of meta.reservations.values()) {
    if (r.kind === 'user') return false; // the rewrite has started
    if (r.inputs.some((f) => !selected.has(f))) return false;
  }
  // A split job holds its inputs between its sub-jobs too; a split user job is a rewrite that has started.
  for (const s of meta.splits.values()) {
    if (s.kind === 'user' || s.inputs.some((f) => !selected.has(f))) return false;
  }
  // So does a sibling's reservation holding files here (meta/holds.ts): its output may take their place.
  for (const h of meta.holds.values()) {
    if (h.kind === 'user' || h.inputs.some((f) => !selected.has(f))) return false;
  }
  return true;
}

/** Whether `split` is a user job none of whose requests is left (an admin cancelled them all). */
export function isAbandonedSplit(meta: TabletMeta, split: SplitJob): boolean {
  const ids = split.userCompactionIds ?? [];
  return split.kind === 'user' && ids.length > 0 && ids.every((id) => !meta.userCompactions.has(id));
}

/** The abandoned user splits none of whose sub-jobs is reserved any more: the step drops them. */
function droppedSplits(meta: TabletMeta): [string, SplitJob][] {
  const running = new Set<string>();
  for (const r of meta.reservations.values()) if (r.split) running.add(r.split.id);
  return [...meta.splits].filter(([id, s]) => isAbandonedSplit(meta, s) && !running.has(id));
}

/**
 * The running user jobs of a tablet none of whose requests is left (all cancelled by an admin): the
 * tablet server cancels them, so a cancelled rewrite does not go on to commit.
 */
export function abandonedUserJobs(meta: TabletMeta): string[] {
  return [...meta.reservations]
    .filter(([, r]) => {
      const ids = satisfiedBy(r);
      return r.kind === 'user' && ids.length > 0 && ids.every((id) => !meta.userCompactions.has(id));
    })
    .map(([ecid]) => ecid);
}

/** The user compactions a user reservation satisfies. */
export function satisfiedBy(r: { userCompactionId?: string; userCompactionIds?: string[] }): string[] {
  return r.userCompactionIds ?? (r.userCompactionId === undefined ? [] : [r.userCompactionId]);
}

/**
 * What a commit does to the tablet's user compaction (selection.ts): a user job ends the requests it
 * satisfies and its selection (null: deleted); a system job started before the selection, over files in
 * it, leaves its output in their place (a new selection); any other job leaves it alone (undefined).
 */
export function selectionAfterCommit(
  meta: TabletMeta,
  r: Reservation,
  outputs: readonly string[],
): { satisfied: string[]; selection: Selection | null | undefined } {
  const current = meta.selection;
  if (r.kind === 'user') {
    const satisfied = satisfiedBy(r);
    const ends = current !== undefined && current.ids.some((id) => satisfied.includes(id));
    return { satisfied, selection: ends ? null : undefined };
  }
  if (!current || !r.inputs.every((f) => current.files.includes(f)))
    return { satisfied: [], selection: undefined };
  const files = current.files.filter((f) => !r.inputs.includes(f));
  files.push(...outputs);
  return { satisfied: [], selection: { ...current, files: files.sort() } };
}
