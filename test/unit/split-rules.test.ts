/**
 * Split jobs on the tablet (src/tserver/split-rules.ts, with rules.ts and reserve-rules.ts), alone: a large
 * job is split into sub-jobs that different compactors reserve, each over its own rows; the last commit
 * installs every output in one change; a sub-job that ends without a commit is planned again; the split
 * holds its inputs out of every other job until then. Real compactors run split jobs in
 * test/cluster/split.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DONE_PREFIX, parseOutcome } from '../../src/meta/outcomes.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { failureKey, parseTablet, type TabletMeta } from '../../src/meta/tablet.js';
import { USER_PRIORITY_BASE } from '../../src/queue/planner.js';
import { abandonedUserJobs, userStep } from '../../src/queue/selection.js';
import { planTablet } from '../../src/queue/tablet-plan.js';
import { decideReserve, reservedJob, type ReserveContext } from '../../src/tserver/reserve-rules.js';
import { commitHappened, decideCancel, decideCommit, isAbandoned } from '../../src/tserver/rules.js';

const ROW = '0001<';
const MB = 1024 * 1024;
// Jobs over 1 MB split into up to 4 sub-jobs; jobs go to queue `q` (id q001).
const CONFIG = tableConfigSchema.parse({ splitAbove: MB, maxSplits: 4, queues: [{ queue: 'q' }] });
const DROP_X = [{ name: 'dropRowPrefix', options: { prefixes: ['x'] } }];
const compactor = (n: number) => `/exc/compactors/q001/_c_x-c-000000000${n}`;

function tablet(sizes: Record<string, number>): TabletMeta {
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const [f, size] of Object.entries(sizes)) meta.files.set(f, { size, entries: size / 100 });
  return meta;
}

let n = 0;
function ctx(meta: TabletMeta, extra: Partial<ReserveContext> = {}): ReserveContext {
  n++;
  return {
    jobs: planTablet(meta, CONFIG),
    config: CONFIG,
    queueIdOf: (name) => (name === 'q' ? 'q001' : undefined),
    ecid: `01J00000000000000000000${String(n).padStart(3, '0')}`,
    output: `tables/0001/C${n}.rf`,
    now: 5_000 + n,
    mayDropDeletes: true,
    ...extra,
  };
}

/** Reserves for compactor `c`, splitting at `bounds` when asked; applies the change; returns the decision. */
function reserve(meta: TabletMeta, c: number, bounds: string[] = ['6d', '74']) {
  const req = { tablet: ROW, queueId: 'q001', compactor: compactor(c) };
  const base = ctx(meta);
  let d = decideReserve(meta, req, base);
  if (d.kind === 'split')
    d = decideReserve(meta, req, { ...base, splitBounds: { files: d.job.files, bounds } });
  if (d.kind !== 'reserve') throw new Error(`expected a reservation, got ${d.kind}`);
  d.change.apply(meta);
  return d;
}

function commit(meta: TabletMeta, ecid: string, output: { size: number; entries: number } | null) {
  const r = meta.reservations.get(ecid)!;
  const req = { tablet: ROW, ecid, compactor: r.compactor, output };
  const change = decideCommit(meta, r, req, { now: 9_000, server: 'ts:1' });
  change.apply(meta);
  return { change, r };
}

describe('split rules', () => {
  it('split - a job over splitAbove asks where to split it, then reserves sub-job 0 with the split', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const req = { tablet: ROW, queueId: 'q001', compactor: compactor(1) };
    const first = decideReserve(meta, req, ctx(meta));
    // 3 MB over 1 MB: three sub-jobs.
    expect(first).toMatchObject({ kind: 'split', parts: 3 });
    if (first.kind !== 'split') return;
    expect(first.job.files.sort()).toEqual(['a', 'b', 'c']);
    const d = decideReserve(meta, req, {
      ...ctx(meta),
      splitBounds: { files: first.job.files, bounds: ['6d', '74'] },
    });
    expect(d.kind).toBe('reserve');
    if (d.kind !== 'reserve') return;
    expect(d.reservation.split).toEqual({ id: d.ecid, index: 0, of: 3, end: '6d' });
    expect(reservedJob(meta, d.ecid, d.reservation).range).toEqual({ end: '6d' });
    const splitPut = d.change.puts.find((p) => p.col === `split:${d.ecid}`);
    expect(JSON.parse(splitPut!.value)).toMatchObject({ bounds: ['6d', '74'], done: [null, null, null] });
    expect(d.change.conditions).toContainEqual({ op: 'absent', row: ROW, col: `split:${d.ecid}` });
    // Bounds chosen for another job are not used; no bounds at all: the job runs whole.
    expect(
      decideReserve(meta, req, { ...ctx(meta), splitBounds: { files: ['a'], bounds: ['6d'] } }).kind,
    ).toBe('split');
    const whole = decideReserve(meta, req, {
      ...ctx(meta),
      splitBounds: { files: first.job.files, bounds: [] },
    });
    expect(whole.kind === 'reserve' && whole.reservation.split).toBeUndefined();
  });

  it('split - every sub-job of a split of all the files keeps deletes when the split was made while they had to be', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const req = { tablet: ROW, queueId: 'q001', compactor: compactor(1) };
    const base = { ...ctx(meta), mayDropDeletes: false };
    const first = decideReserve(meta, req, base);
    if (first.kind !== 'split') throw new Error(first.kind);
    const d = decideReserve(meta, req, { ...base, splitBounds: { files: first.job.files, bounds: ['6d'] } });
    if (d.kind !== 'reserve') throw new Error(d.kind);
    expect(d.reservation).toMatchObject({ allFiles: true, settings: { dropDeletes: false } });
    d.change.apply(meta);
    // The next sub-job, reserved when deletes could be dropped, runs with the split's settings.
    const s1 = decideReserve(meta, { ...req, compactor: compactor(2) }, ctx(meta));
    expect(s1.kind === 'reserve' && s1.reservation.settings.dropDeletes).toBe(false);
  });

  it('split - small jobs and maxSplits=1 are never split; the count is capped by maxSplits', () => {
    const req = { tablet: ROW, queueId: 'q001', compactor: compactor(1) };
    expect(decideReserve(tablet({ a: 400_000, b: 400_000 }), req, ctx(tablet({}))).kind).toBe('no-work');
    const small = tablet({ a: 300_000, b: 300_000, c: 300_000 });
    expect(decideReserve(small, req, ctx(small)).kind).toBe('reserve');
    const big = tablet({ a: 5 * MB, b: 5 * MB, c: 5 * MB });
    expect(decideReserve(big, req, ctx(big))).toMatchObject({ kind: 'split', parts: 4 });
    const never = { ...ctx(big), config: { ...CONFIG, maxSplits: 1 } };
    expect(decideReserve(big, req, never).kind).toBe('reserve');
  });

  it('split - sub-jobs go to different compactors; the last commit installs every output at once', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const s0 = reserve(meta, 1);
    const id = s0.ecid;
    // The rest of the split is planned first, for the job's queue; its inputs are in no other job.
    const planned = planTablet(meta, CONFIG);
    expect(planned.map((j) => j.split)).toEqual([
      { id, index: 1 },
      { id, index: 2 },
    ]);
    const s1 = reserve(meta, 2);
    const s2 = reserve(meta, 3);
    expect([s1.reservation.split, s2.reservation.split]).toEqual([
      { id, index: 1, of: 3, start: '6d', end: '74' },
      { id, index: 2, of: 3, start: '74' },
    ]);
    expect(planTablet(meta, CONFIG)).toEqual([]);
    // Sub-jobs commit in any order; until the last, the tablet's files do not change.
    const c2 = commit(meta, s2.ecid, { size: 900, entries: 9 });
    expect(c2.change.deletes.some((d) => d.col.startsWith('file:'))).toBe(false);
    expect(meta.splits.get(id)!.done).toEqual([
      null,
      null,
      { output: s2.reservation.output, size: 900, entries: 9, ecid: s2.ecid },
    ]);
    expect(commitHappened(meta, c2.r, s2.ecid, { size: 900, entries: 9 })).toBe(true);
    commit(meta, s0.ecid, null); // nothing survived in its rows: no file
    const createdAt = meta.splits.get(id)!.createdAt;
    expect([...meta.files.keys()].sort()).toEqual(['a', 'b', 'c']);
    const last = commit(meta, s1.ecid, { size: 800, entries: 8 });
    expect([...meta.files.keys()].sort()).toEqual([s1.reservation.output, s2.reservation.output].sort());
    expect(meta.splits.size).toBe(0);
    // The outputs are one compaction's, by row range: weighed as one file, they are not compacted again
    // among themselves (two of equal size would satisfy the ratio at once, and so on forever).
    expect(meta.files.get(s1.reservation.output)?.group).toBe(id);
    expect(planTablet(meta, CONFIG)).toEqual([]);
    // With files of their size beside them they are compacted together, all or none.
    meta.files.set('n1', { size: 1700, entries: 17 });
    meta.files.set('n2', { size: 1700, entries: 17 });
    const [next, ...more] = planTablet(meta, CONFIG);
    expect(more).toEqual([]);
    expect([...next!.files].sort()).toEqual(
      [s1.reservation.output, s2.reservation.output, 'n1', 'n2'].sort(),
    );
    expect(next).toMatchObject({ inputBytes: 5100, allFiles: true });
    expect(last.change.deletes).toContainEqual({ row: ROW, col: `split:${id}` });
    expect(
      last.change.puts
        .filter((p) => p.row.startsWith('~del:'))
        .map((p) => p.row)
        .sort(),
    ).toEqual(['~del:a', '~del:b', '~del:c']);
    // Each sub-job's reservation ended with its own outcome, naming its split.
    const own = parseOutcome(c2.change.puts.find((p) => p.row === `${DONE_PREFIX}${s2.ecid}`)!.value)!;
    expect(own).toMatchObject({ outcome: 'committed', outputBytes: 900, split: { id, index: 2, of: 3 } });
    expect(own.split!.whole).toBeUndefined();
    // The last one's figures are its own; it also describes the whole job, which only it can: from the
    // split's first reservation, every sub-job's reservation (in row order) and output.
    const outcome = last.change.puts.find((p) => p.row === `${DONE_PREFIX}${s1.ecid}`)!;
    expect(parseOutcome(outcome.value)).toMatchObject({
      outcome: 'committed',
      entries: 8,
      outputBytes: 800,
      split: {
        id,
        index: 1,
        of: 3,
        whole: { createdAt, ecids: [s0.ecid, s1.ecid, s2.ecid], outputBytes: 1700, entries: 17 },
      },
    });
  });

  it('split - a sub-job that ends without a commit is planned again; failures count against the split', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const s0 = reserve(meta, 1);
    commit(meta, reserve(meta, 2).ecid, { size: 10, entries: 1 });
    const cancel = (ecid: string) => {
      const d = decideCancel(meta, ecid, 'compactor-gone', {
        now: 9_000,
        server: 'ts:1',
        maxAttempts: CONFIG.maxAttempts,
        queueExists: true,
      });
      if (d.kind !== 'cancel') throw new Error('no cancel');
      d.change.apply(meta);
      return d;
    };
    const d = cancel(s0.ecid);
    expect(d.keptCheckpoint).toBe(false);
    expect(d.failure?.attempts).toBe(1);
    // Sub-job 0 again, and sub-job 2 not yet taken; the done one keeps its output.
    expect(planTablet(meta, CONFIG).map((j) => j.split?.index)).toEqual([0, 2]);
    expect(meta.splits.get(s0.ecid)!.done[1]).not.toBeNull();
    const again = reserve(meta, 3);
    expect(again.reservation.split).toMatchObject({ id: s0.ecid, index: 0 });
    expect(again.reservation.attempt).toBe(1);
    cancel(again.ecid);
    cancel(reserve(meta, 4).ecid);
    // Parked after maxAttempts (3): no sub-job is planned, and the inputs stay out of other jobs.
    expect(meta.failures.get(failureKey(['a', 'b', 'c']))?.parked).toBe(true);
    expect(planTablet(meta, CONFIG)).toEqual([]);
  });

  it('split - sub-jobs that die together cost their split one attempt, not one each', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const subJobs = [reserve(meta, 1), reserve(meta, 2), reserve(meta, 3)];
    for (const { ecid } of subJobs) {
      const d = decideCancel(meta, ecid, 'compactor-gone', {
        now: 9_000,
        server: 'ts:1',
        maxAttempts: CONFIG.maxAttempts,
        queueExists: true,
      });
      if (d.kind === 'cancel') d.change.apply(meta);
    }
    expect(meta.failures.get(failureKey(['a', 'b', 'c']))).toMatchObject({ attempts: 1, parked: false });
    // The next round is reserved at attempt 1, and a death there is the second attempt.
    expect(reserve(meta, 4).reservation.attempt).toBe(1);
  });

  it('split - a user compaction requested meanwhile waits for the split and rewrites its outputs', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    const s0 = reserve(meta, 1);
    const s1 = reserve(meta, 2);
    const s2 = reserve(meta, 3);
    meta.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    // Selected at once (every file), but its job waits: the split still holds the files.
    expect(planTablet(meta, CONFIG)).toEqual([]);
    meta.selection = { ids: ['U1'], files: ['a', 'b', 'c'], filters: [] };
    for (const s of [s0, s1, s2]) commit(meta, s.ecid, { size: 500, entries: 5 });
    const outputs = [s0, s1, s2].map((s) => s.reservation.output).sort();
    expect(meta.selection.files).toEqual(outputs);
    const jobs = planTablet(meta, CONFIG);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ kind: 'user', userCompactionIds: ['U1'] });
    expect([...jobs[0]!.files].sort()).toEqual(outputs);
  });

  it('split - a large user job is split too; its last sub-job satisfies the requests, with their filters', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    meta.userCompactions.set('U1', { requestedAt: 1, filters: DROP_X });
    meta.userCompactions.set('U2', { requestedAt: 2, filters: DROP_X });
    const s0 = reserve(meta, 1);
    const id = s0.ecid;
    expect(s0.reservation).toMatchObject({ kind: 'user', userCompactionIds: ['U1', 'U2'] });
    expect(s0.reservation.split).toMatchObject({ id, index: 0, of: 3 });
    expect(s0.reservation.settings.filters).toEqual(DROP_X);
    // The selection is written with the split, and the split names the requests.
    expect(meta.selection).toEqual({ ids: ['U1', 'U2'], files: ['a', 'b', 'c'], filters: DROP_X });
    expect(meta.splits.get(id)).toMatchObject({ kind: 'user', userCompactionIds: ['U1', 'U2'] });
    // The other sub-jobs are planned with a user job's priority, ahead of forced system work.
    const planned = planTablet(meta, CONFIG);
    expect(planned.map((j) => [j.kind, j.split?.index])).toEqual([
      ['user', 1],
      ['user', 2],
    ]);
    expect(planned[0]!.priority).toBeGreaterThanOrEqual(USER_PRIORITY_BASE);
    const s1 = reserve(meta, 2);
    const s2 = reserve(meta, 3);
    expect(s2.reservation).toMatchObject({ kind: 'user', userCompactionIds: ['U1', 'U2'] });
    expect(s2.reservation.settings.filters).toEqual(DROP_X);
    const c0 = commit(meta, s0.ecid, { size: 300, entries: 3 });
    commit(meta, s2.ecid, { size: 300, entries: 3 });
    const gone = decideCancel(meta, s1.ecid, 'compactor-gone', {
      now: 9_000,
      server: 'ts:1',
      maxAttempts: CONFIG.maxAttempts,
      queueExists: true,
    });
    if (gone.kind === 'cancel') gone.change.apply(meta);
    // A request made now cannot join, even with no sub-job running: the rewrite has started.
    meta.userCompactions.set('U3', { requestedAt: 3, filters: DROP_X });
    expect(userStep(meta, 0)).toBeUndefined();
    // Until the last sub-job commits, the requests stay and the selection with them.
    expect([...meta.userCompactions.keys()]).toEqual(['U1', 'U2', 'U3']);
    expect(c0.change.deletes.some((d) => d.col.startsWith('compact:'))).toBe(false);
    // Its outcome does not name the requests: only the commit that installs the rewrite satisfies them.
    const c0outcome = c0.change.puts.find((p) => p.row === `${DONE_PREFIX}${s0.ecid}`)!;
    expect(parseOutcome(c0outcome.value)).toMatchObject({ outcome: 'committed', kind: 'user' });
    expect(parseOutcome(c0outcome.value)!.userCompactionIds).toBeUndefined();
    const s1again = reserve(meta, 4);
    expect(s1again.reservation.split).toMatchObject({ id, index: 1 });
    const last = commit(meta, s1again.ecid, { size: 300, entries: 3 });
    expect([...meta.userCompactions.keys()]).toEqual(['U3']);
    expect(meta.selection).toBeUndefined();
    // The installing commit holds only if its requests are still there (a cancel the tablet server has
    // not heard of yet fails it); a sub-job's commit that installs nothing does not depend on them.
    expect(last.change.conditions).toEqual(
      expect.arrayContaining([
        { op: 'present', row: ROW, col: 'compact:U1' },
        { op: 'present', row: ROW, col: 'compact:U2' },
      ]),
    );
    expect(c0.change.conditions.some((c) => 'col' in c && c.col.startsWith('compact:'))).toBe(false);
    expect(meta.splits.size).toBe(0);
    expect(last.change.deletes).toEqual(
      expect.arrayContaining([
        { row: ROW, col: 'compact:U1' },
        { row: ROW, col: 'compact:U2' },
      ]),
    );
    const outcome = last.change.puts.find((p) => p.row === `${DONE_PREFIX}${s1again.ecid}`)!;
    expect(parseOutcome(outcome.value)).toMatchObject({
      outcome: 'committed',
      userCompactionIds: ['U1', 'U2'],
    });
    // U3 rewrites the split's outputs next, as one job.
    const jobs = planTablet(meta, CONFIG);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ kind: 'user', userCompactionIds: ['U3'] });
  });

  it('split - a user split whose requests are all cancelled installs nothing: it is dropped, its outputs marked', () => {
    const meta = tablet({ a: MB, b: MB, c: MB });
    meta.userCompactions.set('U1', { requestedAt: 1, filters: DROP_X });
    const s0 = reserve(meta, 1);
    const s1 = reserve(meta, 2);
    const id = s0.ecid;
    commit(meta, s1.ecid, { size: 300, entries: 3 });
    // Sub-job 0 failed once: the failure record goes with the split.
    const fail = decideCancel(meta, s0.ecid, 'failed', {
      now: 9_000,
      server: 'ts:1',
      maxAttempts: CONFIG.maxAttempts,
      queueExists: true,
    });
    if (fail.kind === 'cancel') fail.change.apply(meta);
    expect(meta.failures.has(failureKey(['a', 'b', 'c']))).toBe(true);
    const s0again = reserve(meta, 3);
    // The admin cancels U1 (the manager deletes compact:U1).
    meta.userCompactions.delete('U1');
    // The running sub-job is cancelled by the tablet server, and may not commit before that; the one not
    // taken is not planned.
    expect(abandonedUserJobs(meta)).toEqual([s0again.ecid]);
    expect(isAbandoned(meta, s0again.ecid)).toBe(true);
    expect(planTablet(meta, CONFIG)).toEqual([]);
    // While a sub-job still runs, the split stays (its commit must still find it).
    expect(userStep(meta, 7_000)?.deletes ?? []).not.toContainEqual({ row: ROW, col: `split:${id}` });
    const cancel = decideCancel(meta, s0again.ecid, 'admin', {
      now: 9_000,
      server: 'ts:1',
      maxAttempts: CONFIG.maxAttempts,
      queueExists: true,
    });
    if (cancel.kind !== 'cancel') throw new Error('no cancel');
    expect(cancel.failure).toBeUndefined();
    cancel.change.apply(meta);
    const step = userStep(meta, 7_000)!;
    expect(step.deletes).toEqual(
      expect.arrayContaining([
        { row: ROW, col: `split:${id}` },
        { row: ROW, col: `failed:${failureKey(['a', 'b', 'c'])}` },
      ]),
    );
    // The output of the sub-job that was done is marked for the collector; nothing is installed.
    expect(step.puts).toContainEqual({ row: `~del:${s1.reservation.output}`, col: 'at', value: '7000' });
    expect(step.puts.some((p) => p.col.startsWith('file:'))).toBe(false);
    step.apply(meta);
    expect(meta.splits.size).toBe(0);
    expect([...meta.files.keys()].sort()).toEqual(['a', 'b', 'c']);
    expect(meta.failures.size).toBe(0);
    // The files are free again: system work is planned over them as before the request.
    expect(userStep(meta, 7_000)).toBeUndefined();
  });
});
