/**
 * The active manager's queue metrics as Prometheus scrapes them: the figures cost a read of every tablet
 * (and of the queue map), so scrapes close together share one read; every `queue` label is a queue's
 * name, and a deleted queue's series go with it.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ViewSources } from '../../src/manager/admin-views.js';
import { registerOutcomeMetrics, type OutcomeCounts } from '../../src/manager/outcome-counts.js';
import {
  managerFigures,
  registerQueueMetrics,
  registerWaitingMetric,
} from '../../src/manager/queue-metrics.js';

/** A stand-in store with no tablets that counts the scans made of it, and a queue map read counted too. */
function cluster() {
  const counts = { scans: 0, nameReads: 0 };
  const sources = {
    store: {
      scan: async () => {
        counts.scans++;
        return { cells: [] };
      },
    },
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
    expect(counts).toEqual({ scans: 1, nameReads: 1 });
    // Once the interval has passed, the next scrape reads again.
    now += 5_000;
    await registry.metrics();
    expect(counts).toEqual({ scans: 2, nameReads: 2 });
  });

  it('with an interval of 0, the metrics of one scrape still share one read', async () => {
    const { counts, sources, names } = cluster();
    const figures = managerFigures(() => sources, names, 0);
    const registry = new Registry();
    registerQueueMetrics(registry, figures);
    registerWaitingMetric(registry, () => ({}), figures);
    await registry.metrics();
    expect(counts).toEqual({ scans: 1, nameReads: 1 });
    await registry.metrics();
    expect(counts).toEqual({ scans: 2, nameReads: 2 });
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
});
