/**
 * The consistency check's side of the object store (check.ts): files referenced and missing, unreferenced
 * objects by where they are on their way to the collector, temporaries of unfinished writes, and deletion
 * marks. Pure functions of the snapshot.
 */
import { checkpointParts, type TabletMeta } from '../meta/tablet.js';
import { ofOutputBeingWritten } from '../storage/index.js';
import { isNotCheckable, type CheckInput, type Items } from './check-input.js';

/** Everything a tablet references: its files, its reservations' inputs and outputs, its checkpoints' parts. */
export function referencedFiles(tablets: readonly TabletMeta[]): Set<string> {
  const out = new Set<string>();
  for (const t of tablets) {
    for (const f of t.files.keys()) out.add(f);
    for (const r of t.reservations.values()) {
      out.add(r.output);
      for (const f of r.inputs) out.add(f);
    }
    for (const part of checkpointParts(t)) out.add(part);
  }
  return out;
}

/** The outputs of every reservation: being written, their parts and temporaries are not leftovers. */
function outputsBeingWritten(tablets: readonly TabletMeta[]): Set<string> {
  const out = new Set<string>();
  for (const t of tablets) for (const r of t.reservations.values()) out.add(r.output);
  return out;
}

export function checkMarks(input: CheckInput): Record<'badDeletionMarks' | 'referencedDeletionMarks', Items> {
  const bad = [...(input.badMarks ?? [])].map(([file, problem]) => ({ row: `~del:${file}`, problem }));
  const referenced = referencedFiles(input.tablets);
  const tabletsOf = new Map<string, string[]>();
  for (const t of input.tablets) {
    const files = new Set(t.files.keys());
    for (const r of t.reservations.values()) [r.output, ...r.inputs].forEach((f) => files.add(f));
    for (const f of files) {
      if (!input.deletions.has(f)) continue;
      const list = tabletsOf.get(f);
      if (list) list.push(t.row);
      else tabletsOf.set(f, [t.row]);
    }
  }
  const stillReferenced = [...input.deletions.keys()]
    .filter((file) => referenced.has(file))
    .sort()
    .map((file) => ({ file, tablets: tabletsOf.get(file) ?? [] }));
  return { badDeletionMarks: bad, referencedDeletionMarks: stillReferenced };
}

type FileProblems =
  'missingFiles' | 'orphanFiles' | 'unreferencedPendingGc' | 'unreferencedYoung' | 'awaitingSweep';

export function checkFiles(input: CheckInput): Record<FileProblems, Items> {
  const objects = input.objects;
  if (isNotCheckable(objects)) {
    return {
      missingFiles: objects,
      orphanFiles: objects,
      unreferencedPendingGc: objects,
      unreferencedYoung: objects,
      awaitingSweep: objects,
    };
  }
  // A tablet's files and its reservations' inputs must exist; an output exists only once written.
  const missing = [];
  for (const t of input.tablets) {
    const needed = new Set(t.files.keys());
    for (const r of t.reservations.values()) for (const f of r.inputs) needed.add(f);
    // The outputs of sub-jobs that wait for the rest of their split: the last commit installs them.
    for (const s of t.splits.values()) for (const d of s.done) if (d?.output) needed.add(d.output);
    for (const file of needed) if (!objects.has(file)) missing.push({ file, tablet: t.row });
  }
  const referenced = referencedFiles(input.tablets);
  const writing = outputsBeingWritten(input.tablets);
  const orphans = [];
  const pending = [];
  const young = [];
  const awaiting = [];
  const sweepBy = input.graceMs + (input.sweepSlackMs ?? 0);
  for (const [file, o] of [...objects].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // The parts of an output being written may wait long for a checkpoint to name them: kept (gc.ts).
    if (referenced.has(file) || ofOutputBeingWritten(file, writing)) continue;
    const markedAt = input.deletions.get(file);
    const ageMs = input.now - o.modifiedMs;
    if (markedAt !== undefined) pending.push({ file, size: o.size, markedAt });
    else if (ageMs < input.graceMs) young.push({ file, size: o.size, modifiedMs: o.modifiedMs, ageMs });
    else if (ageMs < sweepBy) awaiting.push({ file, size: o.size, modifiedMs: o.modifiedMs, ageMs });
    else orphans.push({ file, size: o.size, modifiedMs: o.modifiedMs, ageMs });
  }
  return {
    missingFiles: missing,
    orphanFiles: orphans,
    unreferencedPendingGc: pending,
    unreferencedYoung: young,
    awaitingSweep: awaiting,
  };
}

export function checkTemporaries(input: CheckInput): Record<'staleTemporaries' | 'youngTemporaries', Items> {
  const temporaries = input.temporaries;
  if (isNotCheckable(temporaries)) return { staleTemporaries: temporaries, youngTemporaries: temporaries };
  const stale: Record<string, unknown>[] = [];
  const young: Record<string, unknown>[] = [];
  const writing = outputsBeingWritten(input.tablets);
  const sorted = [...temporaries].sort((a, b) => a.modifiedMs - b.modifiedMs);
  for (const t of sorted) {
    const item = { target: t.target, id: t.id, modifiedMs: t.modifiedMs, ageMs: input.now - t.modifiedMs };
    const withSize = t.size === undefined ? item : { ...item, size: t.size };
    // The collector removes them when it sweeps: past the grace, they may wait for the next sweep. Those of
    // an output a reservation is writing are kept, however old.
    const live = ofOutputBeingWritten(t.target, writing);
    (live || item.ageMs < input.graceMs + (input.sweepSlackMs ?? 0) ? young : stale).push(withSize);
  }
  return { staleTemporaries: stale, youngTemporaries: young };
}
