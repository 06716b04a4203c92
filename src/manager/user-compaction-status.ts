/**
 * What a user compaction's status on a tablet says about the jobs that ran for it, told from their
 * outcome rows (`~done:<ecid>`, those naming the compaction): how many attempts failed and why, and the
 * job that committed it. Pure, so that the rules are tested alone; user-compaction-api.ts reads the rows
 * and the tablets.
 */
import { FAILURE_REASONS, type Outcome } from '../meta/outcomes.js';
import { failureKey, isParked, type TabletMeta } from '../meta/tablet.js';
import type { TabletCompactionStatus } from '../meta/user-compactions.js';
import { satisfiedBy } from '../queue/selection.js';

/** What a state says of a tablet beyond its attempts. */
type StateFields = Omit<TabletCompactionStatus, 'tablet' | 'failedAttempts' | 'lastError'>;

/** The outcomes of the jobs that named a user compaction, on one tablet. */
export interface TabletOutcomes {
  committed?: Outcome & { ecid: string };
  failed: number;
  lastError?: string;
}

/**
 * Adds outcome row `ecid` to `byTablet` (keyed by tablet row) when it names user compaction `id`. Rows
 * must come in ecid order (the order of a scan), so that the last error is the last attempt's.
 *
 * Only the attempts whose end counts towards parking the job are failed attempts (FAILURE_REASONS:
 * failed, stalled, its compactor gone; but not a compactor gone after a checkpoint the next attempt
 * resumes from: `progressed`). One an admin cancelled (reason `admin`: the user compaction
 * cancelled while its job ran, or the job cancelled by its ecid), one its compactor let go on shutting
 * down (`released`) or one whose queue was deleted is none and has no error to show: the compaction did
 * not fail, something stopped it. Its outcome row still names the request, as the truth of what happened for
 * `admin compactions history` and for a repeated cancel (cancel-api.ts); only the status skips it here.
 * A cancelled request reads `cancelled` from its record (`~ucomp:<id>`), not from this row.
 */
export function tallyOutcome(
  byTablet: Map<string, TabletOutcomes>,
  id: string,
  ecid: string,
  o: Outcome,
): void {
  if (!o.userCompactionIds?.includes(id)) return;
  if (o.outcome === 'cancelled' && o.reason !== undefined && !FAILURE_REASONS.has(o.reason)) return;
  // Its compactor died after a checkpoint the next attempt resumes from: progress, not a failure.
  if (o.progressed) return;
  const entry = byTablet.get(o.tablet) ?? { failed: 0 };
  if (o.outcome === 'committed') entry.committed = { ...o, ecid };
  else {
    entry.failed++;
    entry.lastError = o.error ?? o.reason;
  }
  byTablet.set(o.tablet, entry);
}

/** The fields every state of a tablet's status carries: its failed attempts and the last one's error. */
export function attemptFields(
  outcomes: TabletOutcomes | undefined,
): Pick<TabletCompactionStatus, 'failedAttempts' | 'lastError'> {
  return {
    failedAttempts: outcomes?.failed ?? 0,
    ...(outcomes?.lastError === undefined ? {} : { lastError: outcomes.lastError }),
  };
}

/**
 * A tablet on which user compaction `id` is done: the job that committed it (`c`). For a split job, `c`
 * is the commit of its last sub-job, whose own figures are only its share: the job is the whole split it
 * carries (`split.whole`), from the split's first reservation to this commit.
 */
export function committedFields(c: Outcome & { ecid: string }, id: string): StateFields {
  const others = (c.userCompactionIds ?? []).filter((other) => other !== id);
  const coalesced = others.length > 0 ? { coalescedWith: others } : {};
  const whole = c.split?.whole;
  if (c.split && whole) {
    return {
      state: 'done',
      split: { id: c.split.id, ecids: whole.ecids },
      endedAt: c.at,
      ranMs: c.at - whole.createdAt,
      outputBytes: whole.outputBytes,
      ...(c.files ? { files: c.files } : {}),
      ...coalesced,
    };
  }
  return {
    state: 'done',
    ecid: c.ecid,
    compactor: c.compactor,
    endedAt: c.at,
    ranMs: c.at - c.reservedAt,
    ...(c.outputBytes === undefined ? {} : { outputBytes: c.outputBytes }),
    ...(c.files ? { files: c.files } : {}),
    ...coalesced,
  };
}

/**
 * A tablet on which user compaction `id`'s job runs (`t` still has the request): the reservation that
 * holds the job, with its progress; or, for a job split into sub-jobs, the whole split, as a done split is
 * shown — its id, the reservations that hold or committed its sub-jobs (in row order), and what all of
 * them read over all its inputs (a committed sub-job counts as its share). A split runs from its first
 * sub-job's reservation to its last commit, also while a sub-job waits for a compactor again, but not
 * once parked by the table's `maxAttempts` with none of its sub-jobs running (then it is selected, as a
 * parked job that was not split is).
 * Undefined when no job runs for it.
 */
export function runningFields(t: TabletMeta, id: string, maxAttempts: number): StateFields | undefined {
  const sizeOf = (files: readonly string[]): number =>
    files.reduce((sum, f) => sum + (t.files.get(f)?.size ?? 0), 0);
  for (const [splitId, s] of t.splits) {
    if (!satisfiedBy(s).includes(id)) continue;
    const failure = t.failures.get(failureKey(s.inputs));
    const reserved = [...t.reservations.values()].some((r) => r.split?.id === splitId);
    if (failure && isParked(failure, maxAttempts) && !reserved) return undefined;
    const inputBytes = sizeOf(s.inputs);
    const share = inputBytes / s.done.length;
    const holders = new Map<number, string>();
    let bytesRead = 0;
    s.done.forEach((d, index) => {
      if (!d) return;
      bytesRead += share;
      if (d.ecid) holders.set(index, d.ecid);
    });
    for (const [ecid, r] of t.reservations) {
      if (r.split?.id !== splitId) continue;
      holders.set(r.split.index, ecid);
      bytesRead += t.progress.get(ecid)?.bytesRead ?? 0;
    }
    const ecids = [...holders].sort(([a], [b]) => a - b).map(([, ecid]) => ecid);
    return {
      state: 'running',
      split: { id: splitId, ecids },
      bytesRead: Math.min(inputBytes, Math.round(bytesRead)),
      inputBytes,
    };
  }
  for (const [ecid, r] of t.reservations) {
    if (r.kind !== 'user' || !satisfiedBy(r).includes(id)) continue;
    return {
      state: 'running',
      ecid,
      compactor: r.compactor,
      bytesRead: t.progress.get(ecid)?.bytesRead ?? 0,
      // (A sub-job whose split row is not there, which the rules never leave: its share.)
      inputBytes: Math.round(sizeOf(r.inputs) / (r.split?.of ?? 1)),
    };
  }
  return undefined;
}
