/**
 * `excompact health`: exits 0 when a local process answers its /healthz (for container health checks).
 */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import type { Config } from '../config.js';
import { ExcError } from '../errors.js';
import { configFrom } from './connect.js';
import { action } from './exit.js';
import { intOption } from './flags.js';

export function registerHealth(program: Command): void {
  program
    .command('health')
    .description('Check that a process of this machine is healthy (its /healthz answers 200).')
    .option(
      '--port <port>',
      'the process HTTP port (default: the port in EXC_PORT_FILE, else EXC_PORT)',
      intOption('--port', 1, 65535),
    )
    .option('--host <host>', 'where it listens', '127.0.0.1')
    .addHelpText(
      'after',
      '\nExit codes: 0 healthy, 1 no port to check (or --port is not one), 2 not answering or unhealthy.\n\nExamples:\n  excompact health --port 9100\n  EXC_PORT_FILE=/tmp/excompact.port excompact health\n',
    )
    .action(
      action(async (opts: { port?: number; host: string }, cmd: Command) => {
        const port = opts.port ?? portOf(configFrom(cmd));
        const url = `http://${opts.host}:${port}/healthz`;
        const { exchange } = await import('../rpc/http.js');
        const res = await exchange(url, { method: 'GET', signal: AbortSignal.timeout(3_000) }).catch(
          (err: unknown) => {
            throw new ExcError('UNAVAILABLE', `${url}: ${(err as Error).message}`);
          },
        );
        if (res.statusCode !== 200)
          throw new ExcError('UNAVAILABLE', `${url}: ${res.statusCode} ${res.text}`);
        process.stdout.write(`${res.text}\n`);
      }),
    );
}

/**
 * The port a process of this machine listens on: what it wrote to its port file (it may have been started
 * with port 0), else EXC_PORT. A port file not written yet means the process is not listening yet.
 */
function portOf(config: Config): string {
  if (config.portFile) {
    try {
      return readFileSync(config.portFile, 'utf8').trim();
    } catch (err) {
      if (config.port === 0)
        throw new ExcError('UNAVAILABLE', `no port in ${config.portFile}: ${(err as Error).message}`);
    }
  }
  if (config.port === 0)
    throw new ExcError('CONFIG_INVALID', 'no port to check: give --port, EXC_PORT or EXC_PORT_FILE');
  return String(config.port);
}
