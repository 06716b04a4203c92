/**
 * The figures operators scale compactors by, exported by the active manager (a standby exports none):
 *
 *   excompact_queue_jobs{queue,state="queued"|"running"|"parked"}
 *   excompact_queue_bytes{queue}        input bytes waiting: the unreserved files of the queued tablets
 *   excompact_queue_oldest_seconds{queue}  age of the oldest queued entry (0: none queued)
 *   excompact_queue_compactors{queue}   compactors registered (ZooKeeper nodes of the queue)
 *   excompact_table_route_unserved{table,queue}  1 when a table routes to a queue with no compactor
 *   excompact_pickup_seconds{queue}     a `~cq` entry's age when the manager hands it to a compactor
 *
 *   excompact_manager_waiting_compactors{queue}  compactors waiting in a long poll for work
 *
 * Jobs and bytes are read from the metadata store when scraped (the tablets with work, which the
 * manager's index of activity knows — tablet-activity.ts —, and the queue entries), so they are right
 * after any restart or failover. That read, and the queue map's from ZooKeeper, are made at most
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
import { scanAll } from '../meta/backend.js';
import { entryQueuedAt } from '../queue/entries.js';
import { workingTablets, type ViewSources } from './admin-views.js';

/** The queue id of a `~cq:<queueId>:…` row. */
const queueIdOf = (row: string): string => row.split(':', 2)[1] ?? '';

/** Compactors registered for queue `id`; undefined when ZooKeeper cannot say now. */
async function compactorsOf(p: ViewSources, id: string): Promise<number | undefined> {
  try {
    return (await p.session.children(p.layout.queueNode(id))).length;
  } catch {
    return undefined;
  }
}

export interface QueueFigures {
  queued: number;
  running: number;
  parked: number;
  bytes: number;
  /** When its oldest queued entry was queued (none queued: undefined). */
  oldestAt?: number;
  /** Compactors registered for it (undefined: ZooKeeper could not say). */
  compactors?: number;
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
  /** Each table's routes (table name, queue name) and whether that queue has a compactor registered. */
  routes: { table: string; queue: string; served: boolean }[];
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
    if (!p || !names) return { names, queues: new Map(), routes: [] };
    const tables = await p.tables.list();
    const configs = new Map(tables.map((t) => [t.id, t.config.maxAttempts]));
    const byId = queueFigures(await workingTablets(p), (id) => configs.get(id) ?? 3, names.keys());
    // The oldest entry of each queue, from the `~cq` rows (when each was queued).
    for await (const cell of scanAll(p.store, { prefix: '~cq:' })) {
      const at = entryQueuedAt(cell.value);
      const f = byId.get(queueIdOf(cell.row));
      if (at !== undefined && f && (f.oldestAt === undefined || at < f.oldestAt)) f.oldestAt = at;
    }
    // By name; what remains of a deleted queue (entries not yet cleared) has no name, and no series.
    const queues = new Map<string, QueueFigures>();
    for (const [id, f] of byId) {
      const name = names.get(id);
      if (name === undefined) continue;
      f.compactors = await compactorsOf(p, id);
      queues.set(name, f);
    }
    const routes = tables
      .filter((t) => t.state === 'online')
      .flatMap((t) =>
        t.config.queues.flatMap((r) => {
          // A queue that does not exist has no compactor; one ZooKeeper could not count is left out.
          const q = queues.get(r.queue);
          if (q && q.compactors === undefined) return [];
          return [{ table: t.name, queue: r.queue, served: (q?.compactors ?? 0) > 0 }];
        }),
      );
    return { names, queues, routes };
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
    name: 'excompact_queue_oldest_seconds',
    help: 'Age of the oldest job queued per queue, waiting for a compactor (0 when none is queued)',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const byQueue = await queues();
      this.reset();
      const now = Date.now();
      for (const [queue, f] of byQueue)
        this.set({ queue }, f.oldestAt === undefined ? 0 : Math.max(0, now - f.oldestAt) / 1000);
    },
  });
  new Gauge({
    name: 'excompact_queue_compactors',
    help: 'Compactors registered per queue (their ZooKeeper nodes)',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const byQueue = await queues();
      this.reset();
      for (const [queue, f] of byQueue) if (f.compactors !== undefined) this.set({ queue }, f.compactors);
    },
  });
  new Gauge({
    name: 'excompact_table_route_unserved',
    help: 'A table routes work to a queue with no compactor registered (1), or the queue has one (0)',
    labelNames: ['table', 'queue'],
    registers: [registry],
    async collect() {
      const routes = await figures().then(
        (f) => f.routes,
        () => [],
      );
      this.reset();
      for (const r of routes) this.set({ table: r.table, queue: r.queue }, r.served ? 0 : 1);
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

/**
 * `excompact_pickup_seconds{queue}`: told the `~cq` row handed to a compactor, observes how long it waited.
 * The queue's name comes from `names` (queue id → name), read at most once per `namesMs`; an entry of a
 * queue it does not name (deleted since) is not observed.
 */
export function pickupMetric(
  registry: Registry,
  names: () => Promise<Map<string, string>>,
  namesMs = 5_000,
  now: () => number = Date.now,
): (work: { entry: string; queuedAt?: number }) => void {
  const histogram = new Histogram({
    name: 'excompact_pickup_seconds',
    help: 'Age of a queue entry when the manager hands it to a compactor (time from queued to picked up), by queue',
    labelNames: ['queue'],
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });
  let cached: { at: number; names: Promise<Map<string, string>> } | undefined;
  const current = (): Promise<Map<string, string>> => {
    if (!cached || now() - cached.at >= namesMs) {
      const read = { at: now(), names: names() };
      cached = read;
      read.names.catch(() => {
        if (cached === read) cached = undefined;
      });
    }
    return cached.names;
  };
  return ({ entry, queuedAt }) => {
    if (queuedAt === undefined) return;
    const waited = Math.max(0, now() - queuedAt) / 1000;
    const id = queueIdOf(entry);
    current().then(
      (byId) => {
        const queue = byId.get(id);
        if (queue !== undefined) histogram.observe({ queue }, waited);
      },
      () => undefined,
    );
  };
}
