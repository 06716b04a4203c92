/**
 * The active manager's queue metrics as Prometheus scrapes them: the figures cost a read of the tablets
 * at work (and of the queue map), so scrapes close together share one read; every `queue` label is a queue's
 * name, and a deleted queue's series go with it.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ViewSources } from '../../src/manager/admin-views.js';
import { ActivityTable, type ActivityIndex } from '../../src/manager/tablet-activity.js';
import { registerOutcomeMetrics, type OutcomeCounts } from '../../src/manager/outcome-counts.js';
import {
  managerFigures,
  pickupMetric,
  registerQueueMetrics,
  registerWaitingMetric,
} from '../../src/manager/queue-metrics.js';

/** An index of activity with no tablet at work, counting how often it is asked. */
function idle(counts?: { activityReads: number }): ActivityIndex {
  const table = new ActivityTable();
  return {
    current: async () => {
      if (counts) counts.activityReads++;
      return table;
    },
  } as unknown as ActivityIndex;
}

/**
 * A stand-in store with no tablets that counts the scans made of it, and the reads of the index of
 * activity and of the queue map counted too.
 */
function cluster() {
  const counts = { scans: 0, activityReads: 0, nameReads: 0 };
  const sources = {
    store: {
      scan: async () => {
        counts.scans++;
        return { cells: [] };
      },
    },
    activity: idle(counts),
    tables: { list: async () => [] },
  } as unknown as ViewSources;
  const names = async () => {
    counts.nameReads++;
    return new Map([['q1', 'small']]);
  };
  return { counts, sources, names };
}

const outcomes = (totals: [string, number][]) => ({ totals: () => new Map(totals) }) as OutcomeCounts;

describe('manager queue metrics', () => {
  it('scrapes a few ms apart, or at once, share one read of the tablets and of the queue map', async () => {
    const { counts, sources, names } = cluster();
    let now = 1_000_000;
    const figures = managerFigures(
      () => sources,
      names,
      5_000,
      () => now,
    );
    const registry = new Registry();
    registerQueueMetrics(registry, figures);
    registerWaitingMetric(registry, () => ({ q1: 1 }), figures);
    registerOutcomeMetrics(
      registry,
      () => outcomes([['q1|system|committed|', 2]]),
      async () => (await figures()).names,
    );

    const first = await registry.metrics();
    expect(first).toMatch(/excompact_queue_jobs\{queue="small",state="queued"\} 0/);
    for (let i = 0; i < 3; i++) {
      now += 5;
      expect(await registry.metrics()).toBe(first);
    }
    await Promise.all([registry.metrics(), registry.metrics()]);
    // (A read: the tablets at work, none here, and a scan of the queue entries.)
    expect(counts).toEqual({ scans: 1, activityReads: 1, nameReads: 1 });
    // Once the interval has passed, the next scrape reads again.
    now += 5_000;
    await registry.metrics();
    expect(counts).toEqual({ scans: 2, activityReads: 2, nameReads: 2 });
  });

  it('with an interval of 0, the metrics of one scrape still share one read', async () => {
    const { counts, sources, names } = cluster();
    const figures = managerFigures(() => sources, names, 0);
    const registry = new Registry();
    registerQueueMetrics(registry, figures);
    registerWaitingMetric(registry, () => ({}), figures);
    await registry.metrics();
    expect(counts).toEqual({ scans: 1, activityReads: 1, nameReads: 1 });
    await registry.metrics();
    expect(counts).toEqual({ scans: 2, activityReads: 2, nameReads: 2 });
  });

  it('waiting compactors are labelled by queue name; a deleted queue has no series left', async () => {
    const { sources, names } = cluster();
    const figures = managerFigures(() => sources, names, 5_000);
    const registry = new Registry();
    registerWaitingMetric(registry, () => ({ q1: 2, gone: 1 }), figures);
    registerOutcomeMetrics(
      registry,
      () =>
        outcomes([
          ['q1|system|committed|', 3],
          ['gone|user|cancelled|admin', 5],
        ]),
      async () => (await figures()).names,
    );
    const text = await registry.metrics();
    expect(text).toMatch(/^excompact_manager_waiting_compactors\{queue="small"\} 2$/m);
    expect(text).toMatch(
      /^excompact_compactions_ended_total\{queue="small",kind="system",outcome="committed",reason=""\} 3$/m,
    );
    expect(text).not.toMatch(/gone/);
    expect(text).not.toMatch(/queue="q1"/);
  });

  it("oldest queued job, compactors per queue, and a table's route to a queue nobody serves", async () => {
    const now = 1_000_000;
    const sources = {
      store: {
        scan: async (request: { prefix?: string }) => ({
          cells:
            request.prefix === '~cq:'
              ? [
                  {
                    row: '~cq:q1:0000:fffffffe:0001:<',
                    col: 'tablet',
                    value: '{"tablet":"0001<","at":990000}',
                  },
                  {
                    row: '~cq:q1:0001:fffffffe:0001:61',
                    col: 'tablet',
                    value: '{"tablet":"0001;61","at":995000}',
                  },
                  { row: '~cq:q1:0002:fffffffe:0001:62', col: 'tablet', value: 'not json' },
                ]
              : [],
        }),
      },
      activity: idle(),
      tables: {
        list: async () => [
          {
            id: '0001',
            name: 'events',
            state: 'online',
            config: { maxAttempts: 3, queues: [{ queue: 'small' }, { queue: 'nowhere' }] },
          },
          {
            id: '0002',
            name: 'served',
            state: 'online',
            config: { maxAttempts: 3, queues: [{ queue: 'large' }] },
          },
        ],
      },
      layout: { queueNode: (id: string) => `/exc/compactors/${id}` },
      session: {
        children: async (path: string) => (path.endsWith('/q1') ? [] : ['c-1', 'c-2']),
      },
    } as unknown as ViewSources;
    const names = async () =>
      new Map([
        ['q1', 'small'],
        ['q2', 'large'],
      ]);
    const figures = managerFigures(
      () => sources,
      names,
      0,
      () => now,
    );
    const registry = new Registry();
    registerQueueMetrics(registry, figures);
    const realNow = Date.now;
    Date.now = () => now;
    try {
      const text = await registry.metrics();
      expect(text).toMatch(/^excompact_queue_oldest_seconds\{queue="small"\} 10$/m);
      expect(text).toMatch(/^excompact_queue_oldest_seconds\{queue="large"\} 0$/m);
      expect(text).toMatch(/^excompact_queue_compactors\{queue="small"\} 0$/m);
      expect(text).toMatch(/^excompact_queue_compactors\{queue="large"\} 2$/m);
      expect(text).toMatch(/^excompact_table_route_unserved\{table="events",queue="small"\} 1$/m);
      expect(text).toMatch(/^excompact_table_route_unserved\{table="events",queue="nowhere"\} 1$/m);
      expect(text).toMatch(/^excompact_table_route_unserved\{table="served",queue="large"\} 0$/m);
    } finally {
      Date.now = realNow;
    }
  });

  it('the time a job waited for a compactor, by queue name; a queue no longer named is left out', async () => {
    const registry = new Registry();
    let reads = 0;
    const observe = pickupMetric(
      registry,
      async () => {
        reads++;
        return new Map([['q1', 'small']]);
      },
      5_000,
      () => 20_000,
    );
    observe({ entry: '~cq:q1:0000:fffffffe:0001:<', queuedAt: 17_500 });
    observe({ entry: '~cq:q9:0000:fffffffe:0001:<', queuedAt: 10_000 });
    observe({ entry: '~cq:q1:0000:fffffffe:0001:<' });
    await new Promise((r) => setImmediate(r));
    const text = await registry.metrics();
    expect(text).toMatch(/^excompact_pickup_seconds_count\{queue="small"\} 1$/m);
    expect(text).toMatch(/^excompact_pickup_seconds_sum\{queue="small"\} 2.5$/m);
    expect(text).not.toMatch(/q9/);
    expect(reads).toBe(1);
  });
});
