/**
 * A user compaction's status on a tablet, as told from the outcome rows of its jobs
 * (src/manager/user-compaction-status.ts), with the rows written by the tablet server's own rules
 * (src/tserver/rules.ts, split-rules.ts): failed attempts and their last error, and the job that committed
 * it, whole when it ran split into sub-jobs.
 * `admin compactions status` against real processes: test/cli/follow.test.ts, test/cluster/cancel.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { OUTCOME_CLOCK_SKEW_MS, outcomeScanStart } from '../../src/manager/user-compaction-api.js';
import { DONE_PREFIX, parseOutcome } from '../../src/meta/outcomes.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { parseTablet, type Reservation, type TabletMeta } from '../../src/meta/tablet.js';
import { planTablet } from '../../src/queue/tablet-plan.js';
import { decideReserve } from '../../src/tserver/reserve-rules.js';
import type { RuleChange } from '../../src/tserver/rule-change.js';
import { decideCancel, decideCommit, type CancelReason } from '../../src/tserver/rules.js';
import {
  attemptFields,
  committedFields,
  runningFields,
  tallyOutcome,
  type TabletOutcomes,
} from '../../src/manager/user-compaction-status.js';

const ROW = '0001<';
const ulidAt = (ms: number): string => ulid(ms);
const CONFIG = tableConfigSchema.parse({});
const COMPACTOR = '/exc/compactors/q001/_c_x-c-0000000001';

function tablet(files: string[]): TabletMeta {
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const f of files) meta.files.set(f, { size: 100, entries: 10 });
  meta.userCompactions.set('U1', { requestedAt: 1, filters: [] });
  meta.selection = { ids: ['U1'], files, filters: [] };
  return meta;
}

function userJob(meta: TabletMeta, ecid: string, reservedAt: number): Reservation {
  const r: Reservation = {
    compactor: COMPACTOR,
    queueId: 'q001',
    inputs: [...meta.files.keys()],
    output: `tables/0001/C${ecid}.rf`,
    kind: 'user',
    attempt: 0,
    reservedAt,
    allFiles: true,
    userCompactionId: 'U1',
    userCompactionIds: ['U1'],
    settings: { versions: 1, nowMs: reservedAt, filters: [], dropDeletes: true },
  };
  meta.reservations.set(ecid, r);
  return r;
}

/** The outcome rows a change writes, as (ecid, outcome). */
function outcomesIn(change: RuleChange) {
  return change.puts
    .filter((p) => p.row.startsWith(DONE_PREFIX))
    .map((p) => ({ ecid: p.row.slice(DONE_PREFIX.length), outcome: parseOutcome(p.value)! }));
}

function cancel(meta: TabletMeta, ecid: string, reason: CancelReason, error?: string) {
  const d = decideCancel(meta, ecid, reason, {
    now: 8_000,
    server: 'ts:1',
    maxAttempts: CONFIG.maxAttempts,
    queueExists: true,
    ...(error === undefined ? {} : { error }),
  });
  if (d.kind !== 'cancel') throw new Error('no cancel');
  d.change.apply(meta);
  return outcomesIn(d.change);
}

function commit(meta: TabletMeta, ecid: string, now: number, size = 700) {
  const r = meta.reservations.get(ecid)!;
  const req = { tablet: ROW, ecid, compactor: r.compactor, output: { size, entries: size / 100 } };
  const change = decideCommit(meta, r, req, { now, server: 'ts:1' });
  change.apply(meta);
  return outcomesIn(change);
}

/** What the status reads from these rows (in ecid order, as a scan gives them) for U1 on the tablet. */
function tally(rows: { ecid: string; outcome: NonNullable<ReturnType<typeof parseOutcome>> }[]) {
  const byTablet = new Map<string, TabletOutcomes>();
  for (const { ecid, outcome } of [...rows].sort((a, b) => (a.ecid < b.ecid ? -1 : 1)))
    tallyOutcome(byTablet, 'U1', ecid, outcome);
  return byTablet.get(ROW);
}

/** A tablet whose user compaction U1's job splits into 3 sub-jobs; `reserve` reserves the next one. */
function splitTablet() {
  const MB = 1024 * 1024;
  // Jobs over 1 MB split into up to 4 sub-jobs.
  const config = tableConfigSchema.parse({ splitAbove: MB, maxSplits: 4, queues: [{ queue: 'q' }] });
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const f of ['a', 'b', 'c']) meta.files.set(f, { size: MB, entries: 10 });
  meta.userCompactions.set('U1', { requestedAt: 1, filters: [] });
  const reserve = (ecid: string, now: number) => {
    const req = { tablet: ROW, queueId: 'q001', compactor: `${COMPACTOR}${ecid}` };
    const ctx = {
      jobs: planTablet(meta, config),
      config,
      queueIdOf: (name: string) => (name === 'q' ? 'q001' : undefined),
      ecid,
      output: `tables/0001/C${ecid}.rf`,
      now,
      mayDropDeletes: true,
    };
    let d = decideReserve(meta, req, ctx);
    if (d.kind === 'split')
      d = decideReserve(meta, req, { ...ctx, splitBounds: { files: d.job.files, bounds: ['6d', '74'] } });
    if (d.kind !== 'reserve') throw new Error(`expected a reservation, got ${d.kind}`);
    d.change.apply(meta);
    return d.reservation;
  };
  return { meta, reserve, MB, config };
}

describe('user compaction status', () => {
  it('status - a failed attempt is counted with its error; the job that committed is the one shown', () => {
    const meta = tablet(['a', 'b']);
    userJob(meta, 'E1', 1_000);
    const rows = cancel(meta, 'E1', 'failed', 'boom: the disk is on fire');
    expect(runningFields(meta, 'U1', CONFIG.maxAttempts)).toBeUndefined();
    userJob(meta, 'E2', 3_000);
    expect(runningFields(meta, 'U1', CONFIG.maxAttempts)).toEqual({
      state: 'running',
      ecid: 'E2',
      compactor: COMPACTOR,
      bytesRead: 0,
      inputBytes: 200,
    });
    rows.push(...commit(meta, 'E2', 9_000));
    const t = tally(rows);
    expect(attemptFields(t)).toEqual({ failedAttempts: 1, lastError: 'boom: the disk is on fire' });
    expect(committedFields(t!.committed!, 'U1')).toEqual({
      state: 'done',
      ecid: 'E2',
      compactor: COMPACTOR,
      endedAt: 9_000,
      ranMs: 6_000,
      outputBytes: 700,
      // The files it rewrote, from its commit's outcome.
      files: ['a', 'b'],
    });
  });

  it('status - a user compaction an admin cancelled while its job ran counts no failed attempt and no error', () => {
    const meta = tablet(['a', 'b']);
    userJob(meta, 'E1', 1_000);
    // The manager deletes compact:U1; the tablet server then cancels the job (or refuses its commit).
    meta.userCompactions.delete('U1');
    const rows = cancel(meta, 'E1', 'admin');
    // The history keeps the truth: the attempt was cancelled by an admin, for U1.
    expect(rows[0]!.outcome).toMatchObject({
      outcome: 'cancelled',
      reason: 'admin',
      userCompactionIds: ['U1'],
    });
    expect(attemptFields(tally(rows))).toEqual({ failedAttempts: 0 });
  });

  it('status - a job an admin cancelled by its ecid is no failed attempt; a real failure still is', () => {
    const meta = tablet(['a', 'b']);
    userJob(meta, 'E1', 1_000);
    const rows = cancel(meta, 'E1', 'failed', 'boom');
    userJob(meta, 'E2', 2_000);
    // `admin compactions cancel E2`: the request stays, the job is planned again.
    rows.push(...cancel(meta, 'E2', 'admin'));
    expect(meta.userCompactions.has('U1')).toBe(true);
    expect(attemptFields(tally(rows))).toEqual({ failedAttempts: 1, lastError: 'boom' });
    userJob(meta, 'E3', 3_000);
    rows.push(...commit(meta, 'E3', 9_000));
    const t = tally(rows);
    expect(attemptFields(t)).toEqual({ failedAttempts: 1, lastError: 'boom' });
    expect(committedFields(t!.committed!, 'U1')).toMatchObject({ state: 'done', ecid: 'E3' });
  });

  it('status - only what counts towards parking is a failed attempt: not a release on shutdown', () => {
    const meta = tablet(['a', 'b']);
    userJob(meta, 'E1', 1_000);
    const rows = cancel(meta, 'E1', 'released');
    userJob(meta, 'E2', 2_000);
    rows.push(...cancel(meta, 'E2', 'stalled'));
    userJob(meta, 'E3', 3_000);
    rows.push(...cancel(meta, 'E3', 'compactor-gone'));
    // The tablet's failure record (what parks the job) and the status agree: two failed attempts.
    expect([...meta.failures.values()].map((f) => f.attempts)).toEqual([2]);
    expect(attemptFields(tally(rows))).toEqual({ failedAttempts: 2, lastError: 'compactor-gone' });
  });

  it('status - a compactor gone after a checkpoint the next attempt resumes from is no failed attempt; one gone without progress is', () => {
    const meta = tablet(['a', 'b']);
    const checkpoint = {
      parts: [{ name: 'tables/0001/CE1.rf.part00000', size: 100 }],
      bytes: 100,
      state: '{"v":1}',
      at: 1_500,
    };
    userJob(meta, 'E1', 1_000).checkpoint = checkpoint;
    const rows = cancel(meta, 'E1', 'compactor-gone');
    expect(rows[0]!.outcome).toMatchObject({ reason: 'compactor-gone', progressed: true });
    // Not a failure for parking either: the tablet and the status agree.
    expect(meta.failures.size).toBe(0);
    expect(attemptFields(tally(rows))).toEqual({ failedAttempts: 0 });
    // The next attempt resumes from the checkpoint and dies before writing past it: a failed attempt.
    Object.assign(userJob(meta, 'E2', 2_000), { checkpoint, resumedBytes: checkpoint.bytes });
    const more = cancel(meta, 'E2', 'compactor-gone');
    expect(more[0]!.outcome.progressed).toBeUndefined();
    expect([...meta.failures.values()].map((f) => f.attempts)).toEqual([1]);
    expect(attemptFields(tally([...rows, ...more]))).toEqual({
      failedAttempts: 1,
      lastError: 'compactor-gone',
    });
  });

  it('status - a job split into sub-jobs is shown whole: its split and every sub-job, from first reservation to last commit', () => {
    const { meta, reserve, MB } = splitTablet();
    expect(reserve('E1', 1_000).split).toMatchObject({ id: 'E1', index: 0, of: 3 });
    expect(reserve('E2', 1_100).split).toMatchObject({ index: 1 });
    expect(reserve('E3', 1_200).split).toMatchObject({ index: 2 });
    const progress = (bytesRead: number) => ({
      at: 3_000,
      entriesRead: 1,
      entriesWritten: 1,
      bytesRead,
      bytesWritten: 1,
    });
    meta.progress.set('E2', progress(100_000));
    meta.progress.set('E3', progress(200_000));
    // Running, it is shown whole too: every sub-job, what they read of all the inputs.
    expect(runningFields(meta, 'U1', CONFIG.maxAttempts)).toEqual({
      state: 'running',
      split: { id: 'E1', ecids: ['E1', 'E2', 'E3'] },
      bytesRead: 300_000,
      inputBytes: 3 * MB,
    });
    const rows = commit(meta, 'E1', 4_000, 300);
    // Sub-job 1's compactor dies; another runs it again.
    rows.push(...cancel(meta, 'E2', 'compactor-gone'));
    // Still running while sub-job 1 waits for a compactor: sub-job 0 counts as read, its share.
    expect(runningFields(meta, 'U1', CONFIG.maxAttempts)).toEqual({
      state: 'running',
      split: { id: 'E1', ecids: ['E1', 'E3'] },
      bytesRead: MB + 200_000,
      inputBytes: 3 * MB,
    });
    expect(reserve('E4', 5_000).split).toMatchObject({ index: 1 });
    expect(runningFields(meta, 'U1', CONFIG.maxAttempts)?.split).toEqual({
      id: 'E1',
      ecids: ['E1', 'E4', 'E3'],
    });
    rows.push(...commit(meta, 'E3', 6_000, 200));
    rows.push(...commit(meta, 'E4', 9_000, 400));
    expect(meta.userCompactions.has('U1')).toBe(false);
    const t = tally(rows)!;
    expect(attemptFields(t)).toEqual({ failedAttempts: 1, lastError: 'compactor-gone' });
    // Not the last sub-job's ecid, run time and output: the split's id and its sub-jobs' reservations,
    // from its first reservation (E1's) to the last commit, and every output.
    expect(committedFields(t.committed!, 'U1')).toEqual({
      state: 'done',
      split: { id: 'E1', ecids: ['E1', 'E4', 'E3'] },
      endedAt: 9_000,
      ranMs: 8_000,
      outputBytes: 900,
      files: ['a', 'b', 'c'],
    });
  });

  it('status - a parked split with no sub-job running is selected, not running', () => {
    const { meta, reserve, config } = splitTablet();
    for (let attempt = 0; attempt < config.maxAttempts; attempt++) {
      const ecids = [0, 1, 2].map((i) => `E${attempt}${i}`);
      for (const [i, ecid] of ecids.entries()) reserve(ecid, 1_000 * attempt + i);
      // Every sub-job of the attempt fails; the split counts one failed attempt per attempt.
      for (const ecid of ecids) cancel(meta, ecid, 'failed', 'boom');
      if (attempt < config.maxAttempts - 1) {
        expect(runningFields(meta, 'U1', config.maxAttempts)).toMatchObject({ state: 'running' });
      }
    }
    expect([...meta.failures.values()]).toMatchObject([{ attempts: config.maxAttempts, parked: true }]);
    expect(meta.splits.size).toBe(1);
    expect(runningFields(meta, 'U1', config.maxAttempts)).toBeUndefined();
    // Released (or a higher maxAttempts), it runs again.
    expect(runningFields(meta, 'U1', config.maxAttempts + 1)).toMatchObject({ state: 'running' });
  });

  it("outcome scan - starts early enough for jobs dated by a tablet server whose clock is behind the admin's (found by a review)", () => {
    const requested = Date.UTC(2026, 10, 25, 12, 0, 0);
    const id = ulidAt(requested);
    // An ecid made 10 minutes "before" the request by a tablet server's clock that lags the admin's.
    const ecid = ulidAt(requested - 10 * 60_000);
    expect(`${DONE_PREFIX}${ecid}` >= outcomeScanStart(id)).toBe(true);
    expect(outcomeScanStart(id) > `${DONE_PREFIX}${ulidAt(requested - OUTCOME_CLOCK_SKEW_MS - 60_000)}`).toBe(
      true,
    );
    expect(outcomeScanStart('not-a-ulid')).toBe(DONE_PREFIX);
  });
});
