/**
 * `excompact health`: exits 0 when a local process answers its /healthz (for container health checks).
 */
import type { Command } from 'commander';
import { request } from 'undici';
import { ExcError } from '../errors.js';
import { configFrom } from './connect.js';
import { action } from './exit.js';

export function registerHealth(program: Command): void {
  program
    .command('health')
    .description('Check that a process of this machine is healthy (its /healthz answers 200).')
    .option('--port <port>', 'the process HTTP port (default EXC_PORT)')
    .option('--host <host>', 'where it listens', '127.0.0.1')
    .addHelpText(
      'after',
      '\nExit codes: 0 healthy, 2 not answering or unhealthy.\n\nExamples:\n  excompact health --port 9100\n',
    )
    .action(
      action(async (opts: { port?: string; host: string }, cmd: Command) => {
        const port = opts.port ?? String(configFrom(cmd).port);
        const url = `http://${opts.host}:${port}/healthz`;
        const res = await request(url, { signal: AbortSignal.timeout(3_000) }).catch((err: unknown) => {
          throw new ExcError('UNAVAILABLE', `${url}: ${(err as Error).message}`);
        });
        const body = await res.body.text();
        if (res.statusCode !== 200) throw new ExcError('UNAVAILABLE', `${url}: ${res.statusCode} ${body}`);
        process.stdout.write(`${body}\n`);
      }),
    );
}
