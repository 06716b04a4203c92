/**
 * The figures operators scale compactors by, exported by the active manager (a standby exports none):
 *
 *   excompact_queue_jobs{queue,state="queued"|"running"|"parked"}
 *   excompact_queue_bytes{queue}        input bytes waiting: the unreserved files of the queued tablets
 *   excompact_pickup_seconds            a `~cq` entry's age when the manager hands it to a compactor
 *
 *   excompact_manager_waiting_compactors{queue}  compactors waiting in a long poll for work
 *
 * Jobs and bytes are read from the metadata store when scraped (one read of the tablets), so they are
 * right after any restart or failover. That read, and the queue map's from ZooKeeper, are made at most
 * once per `EXC_METRICS_CACHE_MS` ({@link managerFigures}): /metrics answers without a signature, and
 * each scrape would otherwise make the manager read every tablet row. A queued tablet counts as one job
 * even when it holds work for more than one compaction: it is what one compactor picks up next. Every
 * existing queue is reported, with 0 when idle, so an autoscaler sees a queue from its creation on. Every
 * `queue` label holds the queue's name.
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

/** What the manager's queue metrics are made from: one computation, shared by every metric of a scrape. */
export interface ManagerFigures {
  /** Queue id → name, of the queues that exist (undefined: never read yet). */
  names: Map<string, string> | undefined;
  /** Jobs and bytes per queue name (empty while not the active manager). */
  queues: Map<string, QueueFigures>;
}

/**
 * The figures, computed at most once per `minIntervalMs` (from the start of a computation): calls in
 * between get the last ones, and calls while one runs share it. A failed computation is not kept.
 */
export function managerFigures(
  sources: () => ViewSources | undefined,
  queueNames: () => Promise<Map<string, string>>,
  minIntervalMs: number,
  now: () => number = Date.now,
): () => Promise<ManagerFigures> {
  let last: { at: number; settled: boolean; figures: Promise<ManagerFigures> } | undefined;
  let lastNames: Map<string, string> | undefined;
  const compute = async (): Promise<ManagerFigures> => {
    // A queue map that cannot be read this time (ZooKeeper away a moment) keeps the last one: the series
    // labelled from it go on rather than vanishing, or reappearing labelled by queue id.
    const names = (lastNames = await queueNames().catch(() => lastNames));
    const p = sources();
    if (!p || !names) return { names, queues: new Map() };
    const configs = new Map((await p.tables.list()).map((t) => [t.id, t.config.maxAttempts]));
    const byId = queueFigures(await allTablets(p), (id) => configs.get(id) ?? 3, names.keys());
    // By name; what remains of a deleted queue (entries not yet cleared) has no name, and no series.
    const queues = new Map<string, QueueFigures>();
    for (const [id, f] of byId) {
      const name = names.get(id);
      if (name !== undefined) queues.set(name, f);
    }
    return { names, queues };
  };
  return () => {
    if (last && (!last.settled || now() - last.at < minIntervalMs)) return last.figures;
    const current: NonNullable<typeof last> = { at: now(), settled: false, figures: compute() };
    last = current;
    current.figures.then(
      () => (current.settled = true),
      () => {
        if (last === current) last = undefined;
      },
    );
    return current.figures;
  };
}

/** Registers the queue gauges, from `figures` (see {@link managerFigures}). */
export function registerQueueMetrics(registry: Registry, figures: () => Promise<ManagerFigures>): void {
  const queues = (): Promise<Map<string, QueueFigures>> =>
    figures().then(
      (f) => f.queues,
      () => new Map<string, QueueFigures>(),
    );
  new Gauge({
    name: 'excompact_queue_jobs',
    help: 'Compaction jobs per queue: queued (tablets waiting for a compactor), running (reservations), parked',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      const byQueue = await queues();
      this.reset();
      for (const [queue, f] of byQueue) {
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
      const byQueue = await queues();
      this.reset();
      for (const [queue, f] of byQueue) this.set({ queue }, f.bytes);
    },
  });
}

/**
 * `excompact_manager_waiting_compactors{queue}`: `waiting` gives the counts by queue id (undefined while
 * not active); they are labelled by name, and a queue no longer in the map (deleted) is left out.
 */
export function registerWaitingMetric(
  registry: Registry,
  waiting: () => Record<string, number> | undefined,
  figures: () => Promise<ManagerFigures>,
): void {
  new Gauge({
    name: 'excompact_manager_waiting_compactors',
    help: 'Compactors waiting for work, by queue',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const names = await figures().then(
        (f) => f.names,
        () => undefined,
      );
      this.reset();
      const byId = waiting();
      if (!byId || !names) return;
      for (const [id, n] of Object.entries(byId)) {
        const queue = names.get(id);
        if (queue !== undefined) this.set({ queue }, n);
      }
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
