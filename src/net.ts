import { hostname, networkInterfaces } from 'node:os';

/**
 * The host other processes should use to reach a server bound to `bound`. `@ip` advertises the first
 * non-internal IPv4 address (for containers, whose host names other containers cannot always resolve).
 */
/** The address other processes should use to reach a server bound to `bound` (host and port). */
export function advertisedAddress(
  config: { advertiseHost?: string; advertisePort?: number },
  bound: { host: string; port: number },
): { host: string; port: number } {
  return { host: advertisedHost(config, bound.host), port: config.advertisePort || bound.port };
}

export function advertisedHost(config: { advertiseHost?: string }, bound: string): string {
  if (config.advertiseHost === '@ip') return firstExternalIPv4() ?? bound;
  if (config.advertiseHost) return config.advertiseHost;
  if (bound === '0.0.0.0' || bound === '::') return hostname();
  return bound;
}

function firstExternalIPv4(): string | undefined {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}
