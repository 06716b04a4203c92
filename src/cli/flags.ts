import { InvalidArgumentError, type Command } from 'commander';
import { requireSecret, type Config, type SettingKey } from '../config.js';
import { onShutdownSignals } from '../lifecycle.js';
import { createLogger, type Logger } from '../log.js';
import { configFrom } from './connect.js';

/**
 * The parser of an integer flag from `min` to `max` (no upper bound when omitted); anything else stops the
 * command with a message naming the flag and its range.
 */
export function intOption(name: string, min: number, max?: number): (value: string) => number {
  const range =
    max !== undefined
      ? `an integer from ${min} to ${max}`
      : min === 1
        ? 'a positive integer'
        : `an integer >= ${min}`;
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || (max !== undefined && n > max))
      throw new InvalidArgumentError(`${name} must be ${range}`);
    return n;
  };
}

/** Flags shared by every server process; each overrides its environment variable. */
export interface ServerFlags {
  port?: string;
  bind?: string;
  advertise?: string;
  advertisePort?: string;
}

export function serverOptions(command: Command): Command {
  return command
    .option('--port <port>', 'HTTP port, 0 for any free one (EXC_PORT)')
    .option('--bind <host>', 'address to listen on (EXC_BIND_HOST)')
    .option('--advertise <host>', 'host name other processes use to reach this one (EXC_ADVERTISE_HOST)')
    .option('--advertise-port <port>', 'port other processes use to reach this one (EXC_ADVERTISE_PORT)');
}

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

/** On SIGTERM or SIGINT: close the process cleanly, then exit 0. */
export function closeOnSignals(logger: Logger, server: { close(): Promise<void> }): void {
  onShutdownSignals(logger, async () => {
    await server.close();
    return 0;
  });
}
