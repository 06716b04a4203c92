/**
 * Prometheus metrics: one registry per process, with the default Node.js metrics and a `role` label.
 * Components keep plain counters (their `stats`); the metrics here read them when scraped.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

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
