/**
 * Checkpoints and resume on the tablet (DESIGN.md, "Resume"), as pure functions beside rules.ts:
 *
 * 1. Checkpoint. A compactor reports a checkpoint with its progress; the tablet server records the latest
 *    in its reservation (`ecomp:<ecid>` rewritten with it), conditional on the reservation still existing
 *    and not ended, and only when it is `persistBytes` past the recorded one or `persistMs` after it: the
 *    metadata store sees one write per checkpoint interval, never one per block.
 * 2. Keep. When a reservation with a checkpoint is cancelled because its compactor died (`compactor-gone`)
 *    or let it go at shutdown (`released`), and its job is not parked or abandoned, the same mutation keeps
 *    the checkpoint with the requeued job: `resume:<failureKey(inputs)>`, with the job's settings and codec.
 *    Any other end (a failure, a stall, an admin, its queue deleted) drops it: its parts become leftovers
 *    for the collector.
 * 3. Resume. A kept system job comes first for its queue while its inputs are all still the tablet's, none
 *    reserved, selected for a user compaction or a parked job's by the table's current `maxAttempts`, and
 *    `allFiles` still says the same (the planner would rather take them with the files ingested since;
 *    starting over would throw the checkpoint away). A job parked after its checkpoint was kept keeps it
 *    until released (`admin compactions release`) or made moot. Any
 *    job whose planned inputs are exactly a kept record's, of the same kind and `allFiles`, is resumed too
 *    (a user job only with the same filters: the checkpoint's bytes were written through them).
 *    The reservation runs with the kept settings and codec and the checkpoint, and deletes the kept record
 *    in the same mutation. Its output name is fresh, like every reservation's, so the attempt it resumes —
 *    should it still be running somewhere — writes nothing the new one reads or commits.
 * 4. Moot. A kept record some of whose inputs another job reserves or commits can never be resumed: it is
 *    deleted by that job's reservation or commit. A kept user job goes with its selection, when an admin
 *    cancels all of its requests (queue/selection.ts, userStep).
 */
import { isDeepStrictEqual } from 'node:util';
import { ExcError } from '../errors.js';
import {
  ecompCol,
  failureKey,
  resumeCol,
  type CheckpointMeta,
  type Failure,
  type Reservation,
  type Resume,
  type TabletMeta,
} from '../meta/tablet.js';
import { notEnded } from '../meta/outcomes.js';
import type { Cell, Condition } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import { parkedFiles } from '../queue/tablet-plan.js';

/** What a compactor reports: a checkpoint without the time the tablet server records it at. */
export type ReportedCheckpoint = Omit<CheckpointMeta, 'at'>;

export interface CheckpointPersist {
  /** Record a checkpoint only this many bytes past the recorded one… */
  persistBytes: number;
  /** … or this long after it. */
  persistMs: number;
}

/**
 * Whether a reported checkpoint is worth a metadata write now. BAD_REQUEST for one that does not add up
 * (its parts' sizes are not its bytes) — a compactor bug, never recorded.
 */
export function checkpointDue(
  r: Reservation,
  cp: ReportedCheckpoint,
  now: number,
  persist: CheckpointPersist,
): boolean {
  // Sub-jobs of a split are small by construction and never resumed: nothing to record.
  if (r.split) return false;
  const sum = cp.parts.reduce((n, p) => n + p.size, 0);
  if (sum !== cp.bytes) {
    throw new ExcError('BAD_REQUEST', `checkpoint of ${cp.bytes} bytes whose parts hold ${sum}`);
  }
  // Parts are this attempt's own (named after its output) or inherited from the checkpoint it resumed:
  // the compactor that commits deletes them, so a checkpoint may never name anything else.
  const inherited = new Set(r.checkpoint?.parts.map((p) => p.name));
  for (const { name } of cp.parts) {
    const own = name === `${r.output}.partial` || /^\.part\d{5,}$/.test(name.slice(r.output.length));
    if (!inherited.has(name) && !(name.startsWith(r.output) && own)) {
      throw new ExcError('BAD_REQUEST', `checkpoint names ${name}, not a part of output ${r.output}`);
    }
  }
  const last = r.checkpoint;
  if (!last) return true;
  if (cp.bytes <= last.bytes) return false;
  return cp.bytes - last.bytes >= persist.persistBytes || now - last.at >= persist.persistMs;
}

/** Records `cp` in reservation `ecid`, while it exists and has not ended. */
export function checkpointChange(
  meta: TabletMeta,
  ecid: string,
  r: Reservation,
  cp: ReportedCheckpoint,
  now: number,
): { conditions: Condition[]; puts: Cell[]; deletes: []; apply: (m: TabletMeta) => void } {
  const updated: Reservation = { ...r, checkpoint: { ...cp, at: now } };
  return {
    conditions: [{ op: 'present', row: meta.row, col: ecompCol(ecid) }, notEnded(ecid)],
    puts: [{ row: meta.row, col: ecompCol(ecid), value: JSON.stringify(updated) }],
    deletes: [],
    apply: (m) => {
      if (m.reservations.has(ecid)) m.reservations.set(ecid, updated);
    },
  };
}

/** The record a cancel keeps for the requeued job, if any (rule 2). */
export function keptResume(
  r: Reservation,
  ecid: string,
  /** The cancel's reason (rules.ts CancelReason). */
  reason: string,
  failure: Failure | undefined,
  abandoned: boolean,
): { key: string; resume: Resume } | undefined {
  if (!r.checkpoint || r.split || abandoned || failure?.parked) return undefined;
  if (reason !== 'compactor-gone' && reason !== 'released') return undefined;
  return {
    key: failureKey(r.inputs),
    resume: {
      queueId: r.queueId,
      inputs: r.inputs,
      kind: r.kind,
      allFiles: r.allFiles,
      ...(r.clip ? { clip: r.clip } : {}),
      ...(r.compression ? { compression: r.compression } : {}),
      ...(r.blockSize ? { blockSize: r.blockSize } : {}),
      settings: r.settings,
      checkpoint: r.checkpoint,
      fromEcid: ecid,
    },
  };
}

/** The kept cell a cancel writes (rule 2). */
export const resumeCell = (meta: TabletMeta, key: string, resume: Resume): Cell => ({
  row: meta.row,
  col: resumeCol(key),
  value: JSON.stringify(resume),
});

/**
 * For a job about to be reserved: the kept record it resumes (rule 3), and the keys of the kept records it
 * makes moot (rule 4: some of their inputs are this job's, or the record does not fit it).
 */
export function resumeOf(
  meta: TabletMeta,
  job: Pick<PlannedJob, 'files' | 'kind' | 'allFiles' | 'filters'>,
): { resume?: Resume; drop: string[] } {
  const key = failureKey(job.files);
  const files = new Set(job.files);
  let resume: Resume | undefined;
  const drop: string[] = [];
  for (const [k, kept] of meta.resumes) {
    // A user job goes on only from a rewrite through the same filters: what the checkpoint holds was
    // written through the kept ones (a cancelled request's, say, and the next request asks for others).
    const sameRewrite = job.kind !== 'user' || isDeepStrictEqual(kept.settings.filters, job.filters ?? []);
    if (k === key && kept.kind === job.kind && kept.allFiles === job.allFiles && sameRewrite) resume = kept;
    if (k === key || kept.inputs.some((f) => files.has(f))) drop.push(k);
  }
  return { ...(resume ? { resume } : {}), drop };
}

/**
 * The kept system job that comes first for `queueId` (rule 3), if one can run now: not while any of its
 * inputs is a parked job's by the table's current `maxAttempts` (an operator may have lowered it since the
 * cancel kept it), as the planner would not plan a system job over them either.
 */
export function keptJob(meta: TabletMeta, queueId: string, maxAttempts: number): PlannedJob | undefined {
  const busy = new Set([...meta.reservations.values()].flatMap((r) => r.inputs));
  for (const f of meta.selection?.files ?? []) busy.add(f);
  for (const s of meta.splits.values()) for (const f of s.inputs) busy.add(f);
  for (const h of meta.holds.values()) for (const f of h.inputs) busy.add(f);
  for (const f of parkedFiles(meta, maxAttempts)) busy.add(f);
  for (const kept of meta.resumes.values()) {
    if (kept.queueId !== queueId || kept.kind !== 'system') continue;
    if (!kept.inputs.every((f) => meta.files.has(f) && !busy.has(f))) continue;
    if (kept.allFiles !== (kept.inputs.length === meta.files.size)) continue;
    return {
      kind: 'system',
      files: kept.inputs,
      inputBytes: kept.inputs.reduce((n, f) => n + (meta.files.get(f)?.size ?? 0), 0),
      queue: undefined,
      priority: 0,
      allFiles: kept.allFiles,
    };
  }
  return undefined;
}

/** Kept records that a commit of `inputs` makes moot (rule 4). */
export function mootResumes(meta: TabletMeta, inputs: readonly string[]): string[] {
  const files = new Set(inputs);
  return [...meta.resumes].filter(([, kept]) => kept.inputs.some((f) => files.has(f))).map(([k]) => k);
}
