/**
 * `excompact monitor [--port P]`: a live web page of the cluster on this host (queues, compactors, running
 * and parked compactions, tablets, 30-minute charts). It calls the cluster with the instance secret, which
 * never reaches the browser.
 */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { action } from './exit.js';
import { intOption } from './flags.js';

interface MonitorFlags {
  port: number;
  host: string;
  allowRemote?: boolean;
}

export function registerMonitor(program: Command): void {
  program
    .command('monitor')
    .description('Serve a live web page of the cluster on this host (stop with Ctrl-C).')
    .option('--port <port>', 'port to listen on (0: any free port)', intOption('--port', 0), 9990)
    .option('--host <address>', 'address to listen on; beyond loopback it needs --allow-remote', '127.0.0.1')
    .option(
      '--allow-remote',
      'allow a non-loopback --host; the page then asks for the token in EXC_MONITOR_TOKEN (or a generated one, printed)',
    )
    .addHelpText(
      'after',
      `
The page signs nothing itself: this process calls the manager, the tablet servers and the compactors with
the instance secret and serves the page what they answered. Cancelling a compaction and releasing a
parked job ask for a confirmation on the page.

Examples:
  excompact monitor                       # http://127.0.0.1:9990/
  excompact monitor --port 0              # any free port; the address is logged
  EXC_MONITOR_TOKEN=$(openssl rand -hex 16) excompact monitor --host 0.0.0.0 --allow-remote
`,
    )
    .action(
      action(async (flags: MonitorFlags, cmd: Command) => {
        const [{ startMonitor }, { createLogger }, { onShutdownSignals }, { connect }] = await Promise.all([
          import('../monitor/start.js'),
          import('../log.js'),
          import('../lifecycle.js'),
          import('./connect.js'),
        ]);
        const { isLoopback } = await import('../monitor/server.js');
        if (!isLoopback(flags.host) && !flags.allowRemote) {
          throw new ExcError(
            'BAD_REQUEST',
            `--host ${flags.host} is reachable from other hosts: add --allow-remote (the page then needs a login token)`,
          );
        }
        // Checked before connecting: a token too short is the user's to fix, whatever the cluster's state.
        const token = process.env.EXC_MONITOR_TOKEN;
        if (!isLoopback(flags.host) && token && token.length < 16) {
          throw new ExcError(
            'BAD_REQUEST',
            `EXC_MONITOR_TOKEN must be at least 16 characters (it is ${token.length}); unset it for a random one`,
          );
        }
        const cluster = await connect(cmd);
        const logger = createLogger({ name: 'monitor', level: cluster.config.logLevel });
        const { requireSecret } = await import('../config.js');
        const monitor = await startMonitor({
          meta: cluster.meta,
          secret: requireSecret(cluster.config),
          host: flags.host,
          port: flags.port,
          logger,
          ...(token ? { token } : {}),
        });
        logger.info({ url: monitor.url }, 'monitor listening');
        process.stderr.write(`monitor: ${monitor.login ?? monitor.url}\n`);
        onShutdownSignals(logger, async () => {
          await monitor.close();
          await cluster.close();
          return 0;
        });
      }),
    );
}
