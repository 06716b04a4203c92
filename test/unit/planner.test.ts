import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FORCED_PRIORITY_BASE,
  USER_PRIORITY_BASE,
  plan,
  queueDemand,
  routeBySize,
  type PlanInput,
  type PlannerConfig,
} from '../../src/queue/planner.js';

const M = 1 << 20;
const config: PlannerConfig = { ratio: 3, maxFiles: 10, fileLimit: 30, queues: [] };
const files = (...sizes: number[]) => sizes.map((size, i) => ({ name: `f${i}`, size }));
const input = (over: Partial<PlanInput>): PlanInput => ({
  files: [],
  reserved: new Set(),
  parked: new Set(),
  config,
  ...over,
});

describe('planner', () => {
  it('the reference example: 100M, 120M, 100M and 90M files are compacted together', () => {
    const jobs = plan(input({ files: files(100 * M, 120 * M, 100 * M, 90 * M) }));
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ kind: 'system', allFiles: true, inputBytes: 410 * M });
    expect([...jobs[0]!.files].sort()).toEqual(['f0', 'f1', 'f2', 'f3']);
  });

  it('ratio - a big file is not rewritten for the sake of two small ones', () => {
    expect(plan(input({ files: files(1000, 10, 10) }))).toEqual([]);
    const jobs = plan(input({ files: files(1000, 10, 10, 10) }));
    expect(jobs[0]!.files).toEqual(['f1', 'f2', 'f3']);
    expect(jobs[0]!.allFiles).toBe(false);
  });

  it('ratio - takes the largest qualifying set of the smallest files, at most maxFiles', () => {
    const jobs = plan(
      input({ files: files(...Array.from({ length: 25 }, () => 5)), config: { ...config, maxFiles: 10 } }),
    );
    // 25 equal files: two full jobs of 10, and the last 5 still satisfy the ratio (25 >= 3 x 5).
    expect(jobs.map((j) => j.files.length)).toEqual([10, 10, 5]);
  });

  it('file limit - forces a compaction of the smallest files when the ratio finds nothing', () => {
    // Doubling sizes never satisfy ratio 3.
    const sizes = Array.from({ length: 8 }, (_, i) => 2 ** i * 1000);
    expect(plan(input({ files: files(...sizes), config: { ...config, fileLimit: 10 } }))).toEqual([]);
    const jobs = plan(input({ files: files(...sizes), config: { ...config, fileLimit: 6, maxFiles: 3 } }));
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.files).toEqual(['f0', 'f1', 'f2']);
    expect(jobs[0]!.priority).toBe(FORCED_PRIORITY_BASE + 8);
  });

  it('reserved and parked files are never selected', () => {
    const jobs = plan(
      input({ files: files(10, 10, 10, 10, 10), reserved: new Set(['f0']), parked: new Set(['f1']) }),
    );
    expect(jobs.flatMap((j) => j.files).sort()).toEqual(['f2', 'f3', 'f4']);
    expect(jobs[0]!.allFiles).toBe(false);
  });

  it('user compaction - one job over its selection once none of it is reserved; system work goes on outside it', () => {
    const all = files(1000, 10, 10, 10, 10, 10, 10);
    const user = { ids: ['u1', 'u2'], files: ['f0', 'f1', 'f2', 'f3'], filters: [], runnable: true };
    // A system job started before the selection holds f1: the user job waits; the files outside the
    // selection are compacted meanwhile, never the selected ones.
    const waiting = plan(input({ files: all, reserved: new Set(['f1']), user }));
    expect(waiting.map((j) => [j.kind, j.files])).toEqual([['system', ['f4', 'f5', 'f6']]]);
    const jobs = plan(input({ files: all, parked: new Set(['f0']), user }));
    expect(jobs[0]).toEqual(
      expect.objectContaining({
        kind: 'user',
        files: ['f0', 'f1', 'f2', 'f3'],
        allFiles: false,
        userCompactionIds: ['u1', 'u2'],
        priority: USER_PRIORITY_BASE + 7,
      }),
    );
    expect(jobs.slice(1).map((j) => [j.kind, j.files])).toEqual([['system', ['f4', 'f5', 'f6']]]);
    // Over every file of the tablet it may drop delete markers.
    expect(plan(input({ files: files(1, 2), user: { ...user, files: ['f0', 'f1'] } }))[0]).toMatchObject({
      kind: 'user',
      allFiles: true,
    });
    // Parked: not planned, and its files still stay out of system jobs.
    const parked = plan(input({ files: all, user: { ...user, runnable: false } }));
    expect(parked.map((j) => [j.kind, j.files])).toEqual([['system', ['f4', 'f5', 'f6']]]);
  });

  it('routing - by total input size to the first queue it fits, the last may be unbounded', () => {
    const routes = [{ queue: 'small', maxInputBytes: 64 * M }, { queue: 'large' }];
    expect(routeBySize(routes, 10 * M)).toBe('small');
    expect(routeBySize(routes, 64 * M)).toBe('small');
    expect(routeBySize(routes, 65 * M)).toBe('large');
    expect(routeBySize([{ queue: 'small', maxInputBytes: 1 }], 2)).toBeUndefined();
    const jobs = plan(
      input({
        files: files(10 * M, 10 * M, 10 * M, 300 * M, 300 * M, 300 * M),
        config: { ...config, maxFiles: 3, queues: routes },
      }),
    );
    expect(jobs.map((j) => j.queue)).toEqual(['small', 'large']);
    expect(queueDemand(jobs)).toEqual(
      new Map([
        ['small', 6],
        ['large', 6],
      ]),
    );
  });

  it('priority - more files rank higher; forced above ratio; user above all', () => {
    const few = plan(input({ files: files(10, 10, 10) }))[0]!.priority;
    const many = plan(input({ files: files(10, 10, 10, 10, 10, 10) }))[0]!.priority;
    expect(many).toBeGreaterThan(few);
    expect(FORCED_PRIORITY_BASE).toBeGreaterThan(many);
    expect(USER_PRIORITY_BASE).toBeGreaterThan(FORCED_PRIORITY_BASE + 0x0fff_ffff);
  });

  it('properties - jobs are disjoint, never touch reserved or parked files, and respect maxFiles and the ratio', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 1_000_000 }), { maxLength: 40 }),
        fc.integer({ min: 2, max: 12 }),
        fc.double({ min: 1, max: 5, noNaN: true }),
        fc.integer({ min: 2, max: 40 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (sizes, maxFiles, ratio, fileLimit, picks) => {
          const all = files(...sizes);
          const reserved = new Set(
            picks.filter((p) => p % 2 === 0).map((p) => `f${p % Math.max(1, all.length)}`),
          );
          const parked = new Set(
            picks.filter((p) => p % 2 === 1).map((p) => `f${p % Math.max(1, all.length)}`),
          );
          const cfg = { ...config, maxFiles, ratio, fileLimit };
          const jobs = plan(input({ files: all, reserved, parked, config: cfg }));
          const seen = new Set<string>();
          for (const j of jobs) {
            expect(j.files.length).toBeGreaterThanOrEqual(2);
            expect(j.files.length).toBeLessThanOrEqual(maxFiles);
            for (const f of j.files) {
              expect(seen.has(f)).toBe(false);
              expect(reserved.has(f) || parked.has(f)).toBe(false);
              seen.add(f);
            }
            const sizesOf = j.files.map((f) => all.find((x) => x.name === f)!.size);
            if (j.priority < FORCED_PRIORITY_BASE) {
              expect(sizesOf.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(ratio * Math.max(...sizesOf));
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
