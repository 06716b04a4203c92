import { hostname } from 'node:os';

/** The host other processes should use to reach a server bound to `bound`. */
export function advertisedHost(config: { advertiseHost?: string }, bound: string): string {
  if (config.advertiseHost) return config.advertiseHost;
  if (bound === '0.0.0.0' || bound === '::') return hostname();
  return bound;
}
