/**
 * User compactions on a tablet (src/queue/selection.ts): requests coalesced into one selection, requests
 * with other filters kept in order, joining while the rewrite has not started, completion without files,
 * and cancelled requests leaving the selection.
 */
import { describe, expect, it } from 'vitest';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { failureKey, parseTablet, type Reservation, type TabletMeta } from '../../src/meta/tablet.js';
import { abandonedUserJobs, userStep } from '../../src/queue/selection.js';
import { planTablet } from '../../src/queue/tablet-plan.js';

const ROW = '0001<';
const DROP_X = [{ name: 'dropRowPrefix', options: { prefixes: ['x'] } }];

function tablet(files: string[]): TabletMeta {
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const f of files) meta.files.set(f, { size: 100, entries: 10 });
  return meta;
}

function request(meta: TabletMeta, id: string, at: number, filters: typeof DROP_X = []): void {
  meta.userCompactions.set(id, { requestedAt: at, filters });
}

function step(meta: TabletMeta): TabletMeta {
  userStep(meta, 0)?.apply(meta);
  return meta;
}

function reservation(inputs: string[], kind: 'system' | 'user' = 'system'): Reservation {
  return {
    compactor: '/c',
    queueId: 'q001',
    inputs,
    output: 'out',
    kind,
    attempt: 0,
    reservedAt: 1,
    allFiles: false,
    settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: false },
  };
}

describe('user compaction selection', () => {
  it('five requests with the same filters: one selection of every file, satisfying all five', () => {
    const meta = tablet(['a', 'b', 'c']);
    for (let i = 5; i >= 1; i--) request(meta, `U${i}`, i);
    step(meta);
    expect(meta.selection).toEqual({
      ids: ['U1', 'U2', 'U3', 'U4', 'U5'],
      files: ['a', 'b', 'c'],
      filters: [],
    });
    expect(userStep(meta, 0)).toBeUndefined();
    const jobs = planTablet(meta, tableConfigSchema.parse({ queues: [{ queue: 'q' }] }));
    expect(jobs.filter((j) => j.kind === 'user')).toHaveLength(1);
  });

  it('a request for a queue sends its job there whatever its size, and coalesces only with the same queue', () => {
    const meta = tablet(['a', 'b']);
    meta.userCompactions.set('U1', { requestedAt: 1, filters: [], queue: 'rewrites' });
    meta.userCompactions.set('U2', { requestedAt: 2, filters: [], queue: 'rewrites' });
    meta.userCompactions.set('U3', { requestedAt: 3, filters: [] });
    step(meta);
    expect(meta.selection).toEqual({ ids: ['U1', 'U2'], files: ['a', 'b'], filters: [], queue: 'rewrites' });
    // The table routes jobs of this size to `small`: the user job goes to `rewrites` all the same.
    const config = tableConfigSchema.parse({
      queues: [{ queue: 'small', maxInputBytes: 1_000 }, { queue: 'large' }],
    });
    const jobs = planTablet(meta, config);
    expect(jobs.find((j) => j.kind === 'user')).toMatchObject({
      queue: 'rewrites',
      userCompactionIds: ['U1', 'U2'],
    });
    // U3 (no queue) waits for the next rewrite, routed by size.
    meta.userCompactions.delete('U1');
    meta.userCompactions.delete('U2');
    delete meta.selection;
    step(meta);
    expect(meta.selection).toEqual({ ids: ['U3'], files: ['a', 'b'], filters: [] });
    expect(planTablet(meta, config).find((j) => j.kind === 'user')?.queue).toBe('small');
  });

  it('requests with other filters run in order, each once', () => {
    const meta = tablet(['a']);
    request(meta, 'U1', 1);
    request(meta, 'U2', 2, DROP_X);
    request(meta, 'U3', 3);
    step(meta);
    expect(meta.selection?.ids).toEqual(['U1']);
    // U3 has U1's filters but U2 (other filters) comes first: it does not join.
    meta.files.set('b', { size: 1, entries: 1 });
    expect(step(meta).selection?.ids).toEqual(['U1']);
  });

  it('a later request joins while the rewrite has not started and no system job holds a file outside it', () => {
    const meta = tablet(['a', 'b']);
    request(meta, 'U1', 1);
    step(meta);
    meta.files.set('c', { size: 1, entries: 1 });
    meta.files.set('d', { size: 1, entries: 1 });
    meta.reservations.set('E1', reservation(['c']));
    request(meta, 'U2', 2);
    expect(step(meta).selection).toEqual({ ids: ['U1'], files: ['a', 'b'], filters: [] });
    meta.reservations.clear();
    expect(step(meta).selection).toEqual({ ids: ['U1', 'U2'], files: ['a', 'b', 'c', 'd'], filters: [] });
    // Once the rewrite runs, a new request waits for the next one.
    meta.reservations.set('E2', reservation(['a', 'b', 'c', 'd'], 'user'));
    request(meta, 'U3', 3);
    expect(step(meta).selection?.ids).toEqual(['U1', 'U2']);
    // A system job started before the selection (over selected files) does not stop a join.
    meta.reservations.clear();
    meta.reservations.set('E3', reservation(['a']));
    expect(step(meta).selection?.ids).toEqual(['U1', 'U2', 'U3']);
  });

  it("a request joining a parked job's selection retries it: the selection grows, the parked record goes (found by a review)", () => {
    const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }], maxAttempts: 3 });
    const meta = tablet(['a', 'b']);
    request(meta, 'U1', 1);
    step(meta);
    const parked = failureKey(['a', 'b']);
    meta.failures.set(parked, { inputs: ['a', 'b'], attempts: 3, lastError: 'boom', at: 1, parked: true });
    expect(planTablet(meta, config).filter((j) => j.kind === 'user')).toEqual([]);
    meta.files.set('c', { size: 1, entries: 1 });
    request(meta, 'U2', 2);
    const s = userStep(meta, 0)!;
    expect(s.deletes).toContainEqual({ row: ROW, col: `failed:${parked}` });
    s.apply(meta);
    expect(meta.selection).toEqual({ ids: ['U1', 'U2'], files: ['a', 'b', 'c'], filters: [] });
    expect(meta.failures.has(parked)).toBe(false);
    expect(planTablet(meta, config).filter((j) => j.kind === 'user')).toHaveLength(1);

    // Joining without a new file is the same job: still parked, its record kept.
    request(meta, 'U3', 3);
    meta.failures.set(failureKey(['a', 'b', 'c']), {
      inputs: ['a', 'b', 'c'],
      attempts: 3,
      lastError: 'boom',
      at: 2,
      parked: true,
    });
    step(meta);
    expect(meta.selection?.ids).toEqual(['U1', 'U2', 'U3']);
    expect(meta.failures.has(failureKey(['a', 'b', 'c']))).toBe(true);
  });

  it('a tablet without files completes its requests at once', () => {
    const meta = tablet([]);
    request(meta, 'U1', 1);
    request(meta, 'U2', 2, DROP_X);
    request(meta, 'U3', 3);
    const s = userStep(meta, 0)!;
    expect(s.finished).toEqual(['U1', 'U2', 'U3']);
    expect(s.deletes.map((d) => d.col).sort()).toEqual(['compact:U1', 'compact:U2', 'compact:U3']);
    s.apply(meta);
    expect(meta.selection).toBeUndefined();
    expect(meta.userCompactions.size).toBe(0);
  });

  it('cancelled requests leave the selection; the last one takes the selection, its failure record and its running job', () => {
    const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }], maxAttempts: 1 });
    const meta = tablet(['a', 'b', 'c']);
    request(meta, 'U1', 1);
    request(meta, 'U2', 2);
    step(meta);
    const key = failureKey(['a', 'b', 'c']);
    meta.failures.set(key, { inputs: ['a', 'b', 'c'], attempts: 1, lastError: 'boom', at: 1, parked: true });
    meta.reservations.set('E1', { ...reservation(['a', 'b', 'c'], 'user'), userCompactionIds: ['U1', 'U2'] });
    // Parked, the user job holds its files: the tablet plans nothing.
    meta.reservations.clear();
    expect(planTablet(meta, config)).toEqual([]);
    meta.reservations.set('E1', { ...reservation(['a', 'b', 'c'], 'user'), userCompactionIds: ['U1', 'U2'] });

    // U1 cancelled (the manager deleted its request): U2 keeps the selection and the job.
    meta.userCompactions.delete('U1');
    expect(abandonedUserJobs(meta)).toEqual([]);
    const first = userStep(meta, 0)!;
    expect(first.deletes).toEqual([]);
    first.apply(meta);
    expect(meta.selection?.ids).toEqual(['U2']);
    expect(meta.failures.has(key)).toBe(true);

    // U2 cancelled too: the selection goes with its failure record, and the running job is abandoned.
    meta.userCompactions.delete('U2');
    expect(abandonedUserJobs(meta)).toEqual(['E1']);
    const last = userStep(meta, 0)!;
    expect(last.deletes.map((d) => d.col).sort()).toEqual([`failed:${key}`, 'selected']);
    last.apply(meta);
    expect(meta.selection).toBeUndefined();
    expect(meta.failures.size).toBe(0);
    // Its files are system work again once the job is gone.
    meta.reservations.clear();
    expect(planTablet(meta, config).map((j) => j.kind)).toEqual(['system']);
  });
});
