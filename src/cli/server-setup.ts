/**
 * What a server process (manager, tablet server, compactor) starts from, and how it stops on a signal.
 * Loaded when such a command runs, never to build the command line.
 */
import type { Command } from 'commander';
import { requireSecret, type Config, type SettingKey } from '../config.js';
import { SHUTDOWN_MS, onShutdownSignals } from '../lifecycle.js';
import { createLogger, type Logger } from '../log.js';
import { configFrom } from './connect.js';
import type { ServerFlags } from './flags.js';

/**
 * What a server process starts from: the configuration with its flags (and `overrides`) applied, the
 * instance secret, and a logger named after its `role`.
 */
export function serverSetup(
  cmd: Command,
  flags: ServerFlags,
  role: string,
  overrides: Partial<Record<SettingKey, unknown>> = {},
): { config: Config; secret: string; logger: Logger } {
  const config = configFrom(cmd, {
    port: flags.port,
    bindHost: flags.bind,
    advertiseHost: flags.advertise,
    advertisePort: flags.advertisePort,
    ...overrides,
  });
  const secret = requireSecret(config);
  const logger = createLogger({ name: role, level: config.logLevel });
  return { config, secret, logger };
}

/**
 * On SIGTERM or SIGINT: close the process cleanly, then exit 0 — within `graceMs` (a compactor's time for
 * its running jobs) plus SHUTDOWN_MS, whatever it waits on.
 */
export function closeOnSignals(logger: Logger, server: { close(): Promise<void> }, graceMs = 0): void {
  onShutdownSignals(
    logger,
    async () => {
      await server.close();
      return 0;
    },
    { forceAfterMs: graceMs + SHUTDOWN_MS },
  );
}
