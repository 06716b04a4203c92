/**
 * Prometheus metrics: one registry per process, with the default Node.js metrics and a `role` label.
 * Components keep plain counters (their `stats`); the metrics here read them when scraped.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export function createRegistry(role: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ role });
  collectDefaultMetrics({ register: registry, prefix: 'excompact_' });
  return registry;
}

/** The `/metrics` handler input for {@link RpcServer}. */
export function metricsEndpoint(registry: Registry): () => Promise<{ contentType: string; body: string }> {
  return async () => ({ contentType: registry.contentType, body: await registry.metrics() });
}

/** A counter that follows an ever-growing number (or one per label value) read at scrape time. */
export function counterOf(
  registry: Registry,
  name: string,
  help: string,
  read: () => number | Record<string, number> | undefined,
  label = 'kind',
): void {
  const last = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      const value = read();
      if (value === undefined) return;
      const values = typeof value === 'number' ? { '': value } : value;
      for (const [key, v] of Object.entries(values)) {
        const delta = v - (last.get(key) ?? 0);
        if (delta > 0) {
          if (key === '') this.inc(delta);
          else this.inc({ [label]: key }, delta);
        }
        last.set(key, v);
      }
    },
  });
}

/** A gauge read at scrape time (or one per label value). */
export function gaugeOf(
  registry: Registry,
  name: string,
  help: string,
  read: () => number | Record<string, number> | undefined,
  label = 'kind',
): void {
  new Gauge({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      const value = read();
      if (value === undefined) return;
      this.reset();
      if (typeof value === 'number') this.set(value);
      else for (const [key, v] of Object.entries(value)) this.set({ [label]: key }, v);
    },
  });
}

/** The states a ZooKeeper session reports (`ZkSessionState`), plus `none` before the first session. */
const ZK_STATES = ['none', 'connecting', 'connected', 'suspended', 'lost', 'closed'] as const;

/**
 * `excompact_zk_session_state{state}`: 1 for the state of the process's current ZooKeeper session, 0 for
 * the others. A process replaces its session when it expires, so the reading follows `session()`.
 */
export function zkSessionGauge(registry: Registry, session: () => { state: string } | undefined): void {
  new Gauge({
    name: 'excompact_zk_session_state',
    help: "State of the process's ZooKeeper session: 1 for the current one, 0 for the others",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const current = session()?.state ?? 'none';
      for (const state of ZK_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
}

/** Buckets in seconds, from tens of milliseconds to half an hour. */
export const SECONDS_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/** How a compactor's job ended, as `excompact_compactions_total` counts it. */
export type CompactionOutcome = 'committed' | 'failed' | 'cancelled' | 'released';

/**
 * The compactor's own names for how a job ended (its JobOutcome), as counted: `discarded` (its commit was
 * refused: the reservation was cancelled under it) and `abandoned` (stopped when its session was lost or
 * its queue deleted) are both cancellations.
 */
const COUNTED_AS: Record<string, CompactionOutcome> = {
  committed: 'committed',
  failed: 'failed',
  released: 'released',
  discarded: 'cancelled',
  abandoned: 'cancelled',
};

/**
 * A compactor's view of the compactions it ran: `excompact_compactions_total{queue,outcome}`, and for the
 * committed ones `excompact_compaction_seconds{queue}` and `excompact_compaction_input_bytes{queue}`.
 */
export function compactionMetrics(
  registry: Registry,
  queue: string,
): (outcome: CompactionOutcome | 'discarded' | 'abandoned', seconds: number, inputBytes: number) => void {
  const total = new Counter({
    name: 'excompact_compactions_total',
    help: 'Compactions run by this compactor, by queue and outcome (committed, failed, cancelled, released)',
    labelNames: ['queue', 'outcome'],
    registers: [registry],
  });
  const seconds = new Histogram({
    name: 'excompact_compaction_seconds',
    help: 'Time from reservation to commit of the compactions that committed, by queue',
    labelNames: ['queue'],
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });
  const bytes = new Histogram({
    name: 'excompact_compaction_input_bytes',
    help: 'Input bytes of the compactions that committed, by queue',
    labelNames: ['queue'],
    buckets: [1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11],
    registers: [registry],
  });
  // Zero for every outcome from the start: a rate over a series that appears late misses its first step.
  for (const outcome of ['committed', 'failed', 'cancelled', 'released'] as const)
    total.inc({ queue, outcome }, 0);
  return (ended, s, inputBytes) => {
    const outcome = COUNTED_AS[ended] ?? 'cancelled';
    total.inc({ queue, outcome });
    if (outcome !== 'committed') return;
    seconds.observe({ queue }, s);
    bytes.observe({ queue }, inputBytes);
  };
}

/** `excompact_rpc_seconds{route}`: how long each authenticated route took to answer (the RpcServer's `timing`). */
export function rpcTiming(registry: Registry): (route: string, seconds: number) => void {
  const histogram = new Histogram({
    name: 'excompact_rpc_seconds',
    help: 'Time to answer an authenticated RPC, by route (method and path pattern), failures included',
    labelNames: ['route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  return (route, seconds) => histogram.observe({ route }, seconds);
}

/**
 * Checkpoints and resumes of a compactor's jobs (DESIGN.md, "Resume"): jobs that went on from an earlier
 * attempt's checkpoint, the output bytes they did not have to write again, and checkpoints taken.
 */
export function resumeMetrics(
  registry: Registry,
  queue: string,
): { resumed: (bytes: number) => void; checkpointed: () => void } {
  const resumed = new Counter({
    name: 'excompact_compactions_resumed_total',
    help: "Compactions this compactor resumed from an earlier attempt's checkpoint, by queue",
    labelNames: ['queue'],
    registers: [registry],
  });
  const kept = new Counter({
    name: 'excompact_compaction_resumed_bytes_total',
    help: 'Output bytes that resumed compactions took from checkpoints instead of writing again, by queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  const checkpoints = new Counter({
    name: 'excompact_compaction_checkpoints_total',
    help: 'Checkpoints taken by this compactor (parts made durable and reported), by queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  resumed.inc({ queue }, 0);
  kept.inc({ queue }, 0);
  checkpoints.inc({ queue }, 0);
  return {
    resumed: (bytes) => {
      resumed.inc({ queue });
      kept.inc({ queue }, bytes);
    },
    checkpointed: () => checkpoints.inc({ queue }),
  };
}

/** Entries a compaction read and wrote so far (its progress). */
export interface EntryFigures {
  entriesRead: number;
  entriesWritten: number;
}

/**
 * A compactor's `excompact_compactor_entries_read_total{queue}` and `…_written_total{queue}`: the entries
 * its compactions read and wrote, those still running included as far as they got (read at each scrape),
 * so progress shows in the metrics while a long job runs. `ended` is told each job's last figures as it
 * leaves `running`.
 */
export function entryMetrics(
  registry: Registry,
  queue: string,
  running: () => Iterable<{ progress: EntryFigures }>,
): { ended: (last: EntryFigures) => void } {
  const done: EntryFigures = { entriesRead: 0, entriesWritten: 0 };
  const counter = (field: keyof EntryFigures, name: string, help: string) => {
    let reported = 0;
    new Counter({
      name,
      help,
      labelNames: ['queue'],
      registers: [registry],
      collect() {
        let total = done[field];
        for (const r of running()) total += r.progress[field];
        // Never backwards (a counter): a job's figures only grow, and move to `done` as it ends.
        if (total > reported) this.inc({ queue }, total - reported);
        else this.inc({ queue }, 0);
        reported = Math.max(reported, total);
      },
    });
  };
  counter(
    'entriesRead',
    'excompact_compactor_entries_read_total',
    "Entries read by this compactor's compactions, running ones included",
  );
  counter(
    'entriesWritten',
    'excompact_compactor_entries_written_total',
    "Entries written by this compactor's compactions, running ones included",
  );
  return {
    ended: (last) => {
      done.entriesRead += last.entriesRead;
      done.entriesWritten += last.entriesWritten;
    },
  };
}
