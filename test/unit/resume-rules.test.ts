/**
 * Checkpoints and resume on the tablet (src/tserver/resume-rules.ts and their use in rules.ts), alone:
 * which cancels keep a checkpoint with the requeued job, which reservation goes on from it, and when it
 * is dropped. The whole story with real processes is test/cluster/resume.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import {
  checkpointParts,
  failureKey,
  parseTablet,
  resumeCol,
  type Reservation,
  type TabletMeta,
} from '../../src/meta/tablet.js';
import type { PlannedJob } from '../../src/queue/planner.js';
import { checkpointChange, checkpointDue } from '../../src/tserver/resume-rules.js';
import { decideCancel, decideCommit, type CancelReason } from '../../src/tserver/rules.js';
import { decideReserve, reservedJob } from '../../src/tserver/reserve-rules.js';
import { userStep } from '../../src/queue/selection.js';

const ROW = '0001<';
const COMPACTOR = '/exc/compactors/q001/_c_x-c-0000000001';
const CONFIG = tableConfigSchema.parse({ versions: 2, compression: 'lz4' });
const CHECKPOINT = {
  parts: [{ name: 'tables/0001/Cold.rf.part00000', size: 100 }],
  bytes: 100,
  state: '{"v":1}',
  at: 1_500,
};

function tablet(files: string[]): TabletMeta {
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const f of files) meta.files.set(f, { size: 100, entries: 10 });
  return meta;
}

function reservation(inputs: string[], extra: Partial<Reservation> = {}): Reservation {
  return {
    compactor: COMPACTOR,
    queueId: 'q001',
    inputs,
    output: 'tables/0001/Cold.rf',
    kind: 'system',
    attempt: 0,
    reservedAt: 1_000,
    allFiles: false,
    compression: 'zstd',
    settings: { versions: 1, nowMs: 1_000, filters: [], dropDeletes: false },
    checkpoint: CHECKPOINT,
    ...extra,
  };
}

const job = (files: string[], extra: Partial<PlannedJob> = {}): PlannedJob => ({
  kind: 'system',
  files,
  inputBytes: files.length * 100,
  queue: 'small',
  priority: 5,
  allFiles: false,
  ...extra,
});

const cancelCtx = { now: 2_000, server: 'ts:1', maxAttempts: 5, queueExists: true };
const reserve = (meta: TabletMeta, jobs: PlannedJob[], mayDropDeletes = true, config = CONFIG) =>
  decideReserve(
    meta,
    { tablet: ROW, queueId: 'q001', compactor: COMPACTOR },
    {
      jobs,
      config,
      queueIdOf: (name) => (name === 'small' ? 'q001' : undefined),
      ecid: 'E2',
      output: 'tables/0001/Cnew.rf',
      now: 5_000,
      mayDropDeletes,
    },
  );

/** A tablet whose reservation E1 over a, b was cancelled for `reason`. */
function cancelled(reason: CancelReason, extra: Partial<Reservation> = {}): TabletMeta {
  const meta = tablet(['a', 'b', 'c']);
  meta.reservations.set('E1', reservation(['a', 'b'], extra));
  const d = decideCancel(meta, 'E1', reason, cancelCtx);
  if (d.kind !== 'cancel') throw new Error('not cancelled');
  d.change.apply(meta);
  return meta;
}

describe('resume rules', () => {
  it('cancel - a dead or released compactor leaves its checkpoint with the requeued job', () => {
    for (const reason of ['compactor-gone', 'released'] as const) {
      const meta = tablet(['a', 'b']);
      meta.reservations.set('E1', reservation(['a', 'b']));
      const d = decideCancel(meta, 'E1', reason, cancelCtx);
      expect(d.kind === 'cancel' && d.keptCheckpoint).toBe(true);
      if (d.kind !== 'cancel') return;
      // In the cancel's own mutation: never a moment when nothing names the parts.
      const kept = d.change.puts.find((c) => c.col === resumeCol(failureKey(['a', 'b'])));
      expect(JSON.parse(kept!.value)).toMatchObject({ fromEcid: 'E1', checkpoint: CHECKPOINT });
      d.change.apply(meta);
      expect(checkpointParts(meta)).toEqual(['tables/0001/Cold.rf.part00000']);
    }
  });

  it('cancel - a failure, a stall, an admin, a deleted queue or a parked job drop the checkpoint', () => {
    for (const reason of ['failed', 'stalled', 'admin', 'queue-deleted'] as const) {
      expect(cancelled(reason).resumes.size).toBe(0);
    }
    // The attempt that parks the job: nobody will resume it, its parts go to the collector.
    // (One that made no progress since the checkpoint it resumed from: a death after progress is no failure.)
    expect(cancelled('compactor-gone', { attempt: 4, resumedBytes: CHECKPOINT.bytes }).resumes.size).toBe(0);
    // No checkpoint, nothing to keep.
    expect(cancelled('compactor-gone', { checkpoint: undefined }).resumes.size).toBe(0);
  });

  it('cancel - a compactor that died after progress costs no attempt; one that died without progress does', () => {
    const failures = (extra: Partial<Reservation>) =>
      cancelled('compactor-gone', { attempt: 4, ...extra }).failures.get(failureKey(['a', 'b']));
    // A first attempt that recorded a checkpoint, and a resumed one that recorded a later one: no failure,
    // so a job killed at every scale-down is never parked, and its checkpoint is kept.
    expect(failures({})).toBeUndefined();
    expect(failures({ resumedBytes: 40 })).toBeUndefined();
    expect(cancelled('compactor-gone', { attempt: 4, resumedBytes: 40 }).resumes.size).toBe(1);
    // No checkpoint, or none past the one it resumed from: a failed attempt (the 5th parks the job).
    expect(failures({ checkpoint: undefined })).toMatchObject({ attempts: 5, parked: true });
    expect(failures({ resumedBytes: CHECKPOINT.bytes })).toMatchObject({ attempts: 5, parked: true });
    // A failure the compactor reports still counts, progress or not.
    expect(cancelled('failed', { attempt: 1 }).failures.get(failureKey(['a', 'b']))?.attempts).toBe(2);
  });

  it('reserve - the same inputs go on from the kept checkpoint, with the settings and codec it was written with', () => {
    const meta = cancelled('compactor-gone');
    const d = reserve(meta, [job(['a', 'b'])]);
    expect(d.kind).toBe('reserve');
    if (d.kind !== 'reserve') return;
    expect(d.resumedFrom).toBe('E1');
    expect(d.reservation).toMatchObject({
      output: 'tables/0001/Cnew.rf',
      compression: 'zstd',
      settings: { versions: 1, nowMs: 1_000 },
      checkpoint: CHECKPOINT,
    });
    expect(reservedJob(meta, 'E2', d.reservation).checkpoint).toEqual({
      parts: CHECKPOINT.parts,
      bytes: 100,
      state: CHECKPOINT.state,
    });
    expect(d.change.deletes).toEqual([{ row: ROW, col: resumeCol(failureKey(['a', 'b'])) }]);
    d.change.apply(meta);
    expect(meta.resumes.size).toBe(0);
    // Still named, now by the new reservation.
    expect(checkpointParts(meta)).toEqual(['tables/0001/Cold.rf.part00000']);
  });

  it('reserve - a kept job comes before the bigger job the planner would rather run', () => {
    const meta = cancelled('compactor-gone');
    const d = reserve(meta, [job(['a', 'b', 'c'])]);
    expect(d.kind === 'reserve' && d.reservation.inputs).toEqual(['a', 'b']);
    expect(d.kind === 'reserve' && d.reservation.checkpoint).toEqual(CHECKPOINT);
    // Not while one of its inputs is someone else's: then the planner's job runs, and one that takes any
    // of its inputs makes it moot.
    const busy = cancelled('compactor-gone');
    busy.reservations.set('E9', reservation(['b'], { checkpoint: undefined }));
    const other = reserve(busy, [job(['c'])]);
    expect(other.kind === 'reserve' && other.reservation.inputs).toEqual(['c']);
    expect(other.kind === 'reserve' && other.change.deletes).toEqual([]);
    const overlapping = reserve(cancelled('compactor-gone'), [job(['c', 'a'], { kind: 'user' })]);
    expect(overlapping.kind === 'reserve' && overlapping.change.deletes).toContainEqual({
      row: ROW,
      col: resumeCol(failureKey(['a', 'b'])),
    });
  });

  it('reserve - a kept job is not run while its job is parked by a maxAttempts lowered since', () => {
    // A resumed attempt that died without progress: its second failed attempt, with 5 allowed; kept.
    const meta = cancelled('compactor-gone', { attempt: 1, resumedBytes: CHECKPOINT.bytes });
    expect(meta.failures.get(failureKey(['a', 'b']))).toMatchObject({ attempts: 2, parked: false });
    expect(meta.resumes.size).toBe(1);
    expect(reserve(meta, [job(['c'])]).kind === 'reserve').toBe(true);
    // An operator lowers maxAttempts to 2: the planner would not plan it, and the kept record does not
    // bring it back either; the other work runs.
    const lowered = tableConfigSchema.parse({ versions: 2, compression: 'lz4', maxAttempts: 2 });
    const d = reserve(meta, [job(['c'])], true, lowered);
    expect(d.kind === 'reserve' && d.reservation.inputs).toEqual(['c']);
    expect(reserve(meta, [], true, lowered).kind).toBe('no-work');
    // Nor while one of its inputs is another parked job's (found by a review): the planner keeps a parked
    // job's files out of every system job.
    const other = cancelled('released');
    other.failures.set(failureKey(['b', 'c']), {
      inputs: ['b', 'c'],
      attempts: 2,
      lastError: 'boom',
      at: 1_500,
      parked: false,
    });
    expect(reserve(other, [], true, lowered).kind).toBe('no-work');
    const d2 = reserve(other, []);
    expect(d2.kind === 'reserve' && d2.reservation.inputs).toEqual(['a', 'b']);
  });

  it('reserve - the same inputs that are now all the files start over: deletes would be dropped', () => {
    const meta = cancelled('compactor-gone');
    meta.files.delete('c');
    const all = reserve(meta, [job(['a', 'b'], { allFiles: true })]);
    expect(all.kind === 'reserve' && all.reservation.checkpoint).toBeUndefined();
    expect(all.kind === 'reserve' && all.reservation.settings.nowMs).toBe(5_000);
    expect(all.kind === 'reserve' && all.change.deletes).toEqual([
      { row: ROW, col: resumeCol(failureKey(['a', 'b'])) },
    ]);
  });

  it('reserve - a kept job that drops deletes waits while a batch stamped before a marker is in flight', () => {
    const meta = tablet(['a', 'b']);
    const dropping = { versions: 1, nowMs: 1_000, filters: [], dropDeletes: true };
    meta.reservations.set('E1', reservation(['a', 'b'], { allFiles: true, settings: dropping }));
    const d = decideCancel(meta, 'E1', 'compactor-gone', cancelCtx);
    if (d.kind !== 'cancel') throw new Error(d.kind);
    d.change.apply(meta);
    // Its output must be what the first attempt was writing, markers dropped: not now, and the checkpoint
    // is kept for when it may.
    expect(reserve(meta, [job(['a', 'b'], { allFiles: true })], false).kind).toBe('no-work');
    expect(meta.resumes.size).toBe(1);
    const later = reserve(meta, [job(['a', 'b'], { allFiles: true })]);
    expect(later.kind === 'reserve' && later.reservation.checkpoint).toEqual(CHECKPOINT);
    // One that keeps its markers goes on at any time.
    const keeping = cancelled('compactor-gone');
    const any = reserve(keeping, [job(['a', 'b'])], false);
    expect(any.kind === 'reserve' && any.reservation.checkpoint).toEqual(CHECKPOINT);
  });

  it('commit - compacting any input of a kept checkpoint drops it', () => {
    const meta = cancelled('compactor-gone');
    const r = reservation(['b', 'c'], { checkpoint: undefined, output: 'tables/0001/Cx.rf' });
    meta.reservations.set('E3', r);
    const change = decideCommit(
      meta,
      r,
      { tablet: ROW, ecid: 'E3', compactor: COMPACTOR, output: { size: 1, entries: 1 } },
      { now: 3_000, server: 'ts:1' },
    );
    expect(change.deletes).toContainEqual({ row: ROW, col: resumeCol(failureKey(['a', 'b'])) });
    change.apply(meta);
    expect(meta.resumes.size).toBe(0);
  });

  it("user job - a cancelled request's kept rewrite is dropped with its selection, and never resumed through other filters", () => {
    const dropX = [{ name: 'dropRowPrefix', options: { prefixes: ['x'] } }];
    const user = (ids: string[], filters: typeof dropX): Partial<PlannedJob> => ({
      kind: 'user',
      allFiles: true,
      userCompactionIds: ids,
      filters,
    });
    const userReservation = {
      kind: 'user' as const,
      allFiles: true,
      userCompactionId: 'U1',
      userCompactionIds: ['U1'],
      settings: { versions: 1, nowMs: 1_000, filters: dropX, dropDeletes: true },
    };
    const keptRewrite = () => {
      const meta = tablet(['a', 'b']);
      meta.userCompactions.set('U1', { requestedAt: 1, filters: dropX });
      userStep(meta, 0)!.apply(meta);
      meta.reservations.set('E1', reservation(['a', 'b'], userReservation));
      const d = decideCancel(meta, 'E1', 'compactor-gone', cancelCtx);
      if (d.kind !== 'cancel' || !d.keptCheckpoint) throw new Error('no kept checkpoint');
      d.change.apply(meta);
      return meta;
    };

    // The admin cancels U1 after its compactor died: the step that drops the selection drops the kept
    // rewrite too, so a later request over the same files starts afresh through its own filters.
    const meta = keptRewrite();
    meta.userCompactions.delete('U1');
    const step = userStep(meta, 3_000)!;
    expect(step.deletes).toContainEqual({ row: ROW, col: resumeCol(failureKey(['a', 'b'])) });
    step.apply(meta);
    expect(meta.resumes.size).toBe(0);
    meta.userCompactions.set('U2', { requestedAt: 4_000, filters: [] });
    userStep(meta, 4_000)!.apply(meta);
    const d2 = reserve(meta, [job(['a', 'b'], user(['U2'], []))]);
    expect(d2.kind).toBe('reserve');
    if (d2.kind !== 'reserve') return;
    expect(d2.resumedFrom).toBeUndefined();
    expect(d2.reservation.settings.filters).toEqual([]);

    // Even were it still kept, a job through other filters does not go on from it, and drops it.
    const stale = keptRewrite();
    const d3 = reserve(stale, [job(['a', 'b'], user(['U2'], []))]);
    if (d3.kind !== 'reserve') throw new Error(d3.kind);
    expect(d3.resumedFrom).toBeUndefined();
    expect(d3.reservation.settings.filters).toEqual([]);
    expect(d3.change.deletes).toContainEqual({ row: ROW, col: resumeCol(failureKey(['a', 'b'])) });
    // Through the same filters (U1 itself, or a request asking the same), it does.
    const same = keptRewrite();
    const d4 = reserve(same, [job(['a', 'b'], user(['U1'], dropX))]);
    if (d4.kind !== 'reserve') throw new Error(d4.kind);
    expect(d4.resumedFrom).toBe('E1');
    expect(d4.reservation.settings.filters).toEqual(dropX);
  });

  it('checkpoint - recorded at most every interval, only forward, only when its parts add up', () => {
    const persist = { persistBytes: 1_000, persistMs: 30_000 };
    const r = reservation(['a'], { checkpoint: { ...CHECKPOINT, at: 10_000 } });
    const cp = (bytes: number) => ({
      parts: [{ name: 'tables/0001/Cold.rf.part00001', size: bytes }],
      bytes,
      state: 's',
    });
    expect(checkpointDue(reservation(['a'], { checkpoint: undefined }), cp(10), 0, persist)).toBe(true);
    expect(checkpointDue(r, cp(500), 11_000, persist)).toBe(false);
    expect(checkpointDue(r, cp(1_100), 11_000, persist)).toBe(true);
    expect(checkpointDue(r, cp(500), 40_000, persist)).toBe(true);
    expect(checkpointDue(r, cp(50), 40_000, persist)).toBe(false);
    expect(() => checkpointDue(r, { ...cp(2_000), bytes: 3_000 }, 11_000, persist)).toThrow(/parts hold/);
    // Only its own parts or those it inherited: the committing compactor deletes what a checkpoint names.
    const naming = (name: string) => ({ parts: [{ name, size: 2_000 }], bytes: 2_000, state: 's' });
    expect(checkpointDue(r, naming('tables/0001/Cold.rf.partial'), 11_000, persist)).toBe(true);
    expect(() => checkpointDue(r, naming('tables/0001/Iinput.rf'), 11_000, persist)).toThrow(/not a part/);
    expect(() => checkpointDue(r, naming('tables/0001/Cold.rf'), 11_000, persist)).toThrow(/not a part/);
    const inherited = reservation(['a'], {
      output: 'tables/0001/Cnew.rf',
      checkpoint: { ...CHECKPOINT, at: 10_000 },
    });
    const both = {
      parts: [...CHECKPOINT.parts, { name: 'tables/0001/Cnew.rf.part00001', size: 1_900 }],
      bytes: 2_000,
      state: 's',
    };
    expect(checkpointDue(inherited, both, 11_000, persist)).toBe(true);
    const meta = tablet(['a']);
    meta.reservations.set('E1', r);
    const change = checkpointChange(meta, 'E1', r, cp(1_100), 11_000);
    expect(change.conditions).toContainEqual({ op: 'present', row: ROW, col: 'ecomp:E1' });
    change.apply(meta);
    expect(meta.reservations.get('E1')?.checkpoint).toMatchObject({ bytes: 1_100, at: 11_000 });
  });
});
