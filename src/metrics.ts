/**
 * Prometheus metrics: one registry per process, with the default Node.js metrics and a `process` label
 * naming the role. Components register their own counters and gauges on it.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';

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
