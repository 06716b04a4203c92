/**
 * The figures operators scale compactors by, exported by the active manager (a standby exports none):
 *
 *   excompact_queue_jobs{queue,state="queued"|"running"|"parked"}
 *   excompact_queue_bytes{queue}        input bytes waiting: the unreserved files of the queued tablets
 *   excompact_pickup_seconds            a `~cq` entry's age when the manager hands it to a compactor
 *
 * Jobs and bytes are read from the metadata store when scraped (one read of the tablets), so they are
 * right after any restart or failover. A queued tablet counts as one job even when it holds work for more
 * than one compaction: it is what one compactor picks up next. Every existing queue is reported, with 0
 * when idle, so an autoscaler sees a queue from its creation on.
 */
import { Gauge, Histogram, type Registry } from 'prom-client';
import { SECONDS_BUCKETS } from '../metrics.js';
import type { TabletMeta } from '../meta/tablet.js';
import { isParked } from '../meta/tablet.js';
import { allTablets, type ViewSources } from './admin-views.js';

export interface QueueFigures {
  queued: number;
  running: number;
  parked: number;
  bytes: number;
}

/** Jobs and bytes per queue id, for every queue id in `queueIds` (0 when idle) and any other seen. */
export function queueFigures(
  tablets: readonly TabletMeta[],
  maxAttempts: (tableId: string) => number,
  queueIds: Iterable<string>,
): Map<string, QueueFigures> {
  const figures = new Map<string, QueueFigures>();
  const of = (id: string): QueueFigures => {
    let f = figures.get(id);
    if (!f) figures.set(id, (f = { queued: 0, running: 0, parked: 0, bytes: 0 }));
    return f;
  };
  for (const id of queueIds) of(id);
  for (const t of tablets) {
    let unreserved: number | undefined;
    for (const queueId of t.queued.keys()) {
      if (unreserved === undefined) {
        const reserved = new Set([...t.reservations.values()].flatMap((r) => r.inputs));
        unreserved = 0;
        for (const [path, file] of t.files) if (!reserved.has(path)) unreserved += file.size;
      }
      const f = of(queueId);
      f.queued++;
      f.bytes += unreserved;
    }
    for (const r of t.reservations.values()) of(r.queueId).running++;
    for (const failure of t.failures.values()) {
      if (failure.queueId && isParked(failure, maxAttempts(t.tableId))) of(failure.queueId).parked++;
    }
  }
  return figures;
}

/** Registers the queue gauges; `sources` is undefined while the manager is not active. */
export function registerQueueMetrics(
  registry: Registry,
  sources: () => ViewSources | undefined,
  queueNames: () => Promise<Map<string, string>>,
): void {
  let last: Promise<Map<string, QueueFigures>> | undefined;
  // Both gauges are collected in one scrape: read the tablets once for the two.
  const read = (): Promise<Map<string, QueueFigures>> => {
    last ??= (async () => {
      const p = sources();
      if (!p) return new Map<string, QueueFigures>();
      const names = await queueNames();
      const configs = new Map((await p.tables.list()).map((t) => [t.id, t.config.maxAttempts]));
      const byId = queueFigures(await allTablets(p), (id) => configs.get(id) ?? 3, names.keys());
      return new Map([...byId].map(([id, f]) => [names.get(id) ?? id, f]));
    })().finally(() => setTimeout(() => (last = undefined), 0));
    return last;
  };
  new Gauge({
    name: 'excompact_queue_jobs',
    help: 'Compaction jobs per queue: queued (tablets waiting for a compactor), running (reservations), parked',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [queue, f] of await read().catch(() => new Map<string, QueueFigures>())) {
        this.set({ queue, state: 'queued' }, f.queued);
        this.set({ queue, state: 'running' }, f.running);
        this.set({ queue, state: 'parked' }, f.parked);
      }
    },
  });
  new Gauge({
    name: 'excompact_queue_bytes',
    help: 'Input bytes waiting per queue: the unreserved files of the tablets queued for it',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [queue, f] of await read().catch(() => new Map<string, QueueFigures>()))
        this.set({ queue }, f.bytes);
    },
  });
}

/** `excompact_pickup_seconds`: told the `~cq` row handed to a compactor, observes how long it waited. */
export function pickupMetric(registry: Registry): (work: { queuedAt?: number }) => void {
  const histogram = new Histogram({
    name: 'excompact_pickup_seconds',
    help: 'Age of a queue entry when the manager hands it to a compactor (time from queued to picked up)',
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });
  return ({ queuedAt }) => {
    if (queuedAt !== undefined) histogram.observe(Math.max(0, Date.now() - queuedAt) / 1000);
  };
}
