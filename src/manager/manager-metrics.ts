/**
 * The manager's own metrics: group commit, garbage collection, the live tablet servers, its ZooKeeper
 * session, whether it is the active manager, and the queue and outcome figures (queue-metrics.ts,
 * outcome-counts.ts). Each is read at scrape time from what the manager (manager.ts) holds then: the
 * active parts while it has some, nothing of them otherwise.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../log.js';
import { counterOf, gaugeOf, zkSessionGauge } from '../metrics.js';
import { readQueueMap } from '../queue/registry.js';
import type { ZkLayout, ZkSession } from '../zk/index.js';
import type { ActiveManager } from './active.js';
import { registerOutcomeMetrics } from './outcome-counts.js';
import { managerFigures, registerQueueMetrics, registerWaitingMetric } from './queue-metrics.js';

/** What the metrics read of the manager, at every scrape. */
export interface ManagerMetricsSource {
  /** The active parts (undefined while it has none). */
  active(): ActiveManager | undefined;
  /** Whether the manager is `active` now (not suspended, not standby). */
  isActive(): boolean;
  /** The current ZooKeeper session (undefined between two). */
  session(): ZkSession | undefined;
  layout: ZkLayout;
  log: Logger;
  /** Compute the queue metrics at most this often (0: at every scrape). */
  metricsCacheMs: number;
}

export function registerManagerMetrics(registry: Registry, source: ManagerMetricsSource): void {
  counterOf(
    registry,
    'excompact_manager_commit_batches_total',
    'Group commits of the metadata store',
    () => source.active()?.commits.stats.batches,
  );
  counterOf(
    registry,
    'excompact_manager_mutations_total',
    'Conditional mutations applied or rejected',
    () => source.active()?.commits.stats.mutations,
  );
  counterOf(
    registry,
    'excompact_manager_gc_deleted_files_total',
    'Files deleted by the garbage collector',
    () => source.active()?.gc?.stats.deleted,
  );
  counterOf(
    registry,
    'excompact_manager_gc_failed_deletes_total',
    'Deletes of garbage files the object store refused (each is tried again by later GC cycles)',
    () => source.active()?.gc?.stats.failedDeletes,
  );
  gaugeOf(
    registry,
    'excompact_manager_gc_bad_deletion_marks',
    'Deletion marks (~del rows) the last GC cycle skipped because they cannot be acted on; see admin check',
    () => source.active()?.gc?.stats.badMarks,
  );
  counterOf(
    registry,
    'excompact_manager_gc_index_mismatches_total',
    "Sweeps that found the collector's reference index different from the metadata store (a bug; each one repaired from the store)",
    () => source.active()?.gc?.stats.indexMismatches,
  );
  gaugeOf(
    registry,
    'excompact_manager_live_tservers',
    'Live tablet servers',
    () => source.active()?.live.all.size,
  );
  const queueNames = async (): Promise<Map<string, string>> => {
    const { map } = await readQueueMap(source.session()!, source.layout);
    return new Map([...map].map(([name, id]) => [id, name]));
  };
  // One read of the tablets and of the queue map for every queue metric, at most once per
  // metricsCacheMs however often /metrics (unsigned) is scraped.
  const figures = managerFigures(
    () => {
      const active = source.active();
      return active && source.isActive()
        ? { ...active, session: source.session()!, layout: source.layout, log: source.log }
        : undefined;
    },
    queueNames,
    source.metricsCacheMs,
  );
  registerWaitingMetric(registry, () => source.active()?.work.waiting(), figures);
  registerOutcomeMetrics(
    registry,
    () => source.active()?.outcomes,
    async () => (await figures()).names,
  );
  registerQueueMetrics(registry, figures);
  zkSessionGauge(registry, () => source.session());
  gaugeOf(registry, 'excompact_manager_active', '1 when this manager is the active one', () =>
    source.isActive() ? 1 : 0,
  );
}
