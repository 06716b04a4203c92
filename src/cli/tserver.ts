/**
 * `excompact tserver`: hosts tablets, serves ingest and scan, selects compactions, runs reservations.
 */
import type { Command } from 'commander';
import { action } from './exit.js';
import { serverOptions, type ServerFlags } from './flags.js';

export function registerTserver(program: Command): void {
  serverOptions(
    program
      .command('tserver')
      .description('Run a tablet server: hosts tablets, selects and reserves compactions.'),
  )
    .addHelpText(
      'after',
      `
Exit codes: 0 stopped by SIGTERM, 1 bad configuration, 2 ZooKeeper unreachable at start. A tablet server
whose ZooKeeper session expires drops its tablets and registers again with a new session: it does not exit.

Examples:
  EXC_SECRET_FILE=/etc/excompact/secret EXC_ZK=zk1:2181 EXC_STORE=s3://bucket/excompact excompact tserver --port 9200
`,
    )
    .action(
      action(async (flags: ServerFlags, cmd: Command) => {
        const [{ TabletServer }, { openObjectStore }, { closeOnSignals, serverSetup }] = await Promise.all([
          import('../tserver/tserver.js'),
          import('../storage/index.js'),
          import('./server-setup.js'),
        ]);
        const { config, secret, logger } = serverSetup(cmd, flags, 'tserver');
        const store = openObjectStore(config, logger);
        const tserver = new TabletServer({ ...config, secret, store, logger });
        // Its grace: the time it gives the manager to move its tablets off (EXC_TSERVER_HANDOVER_MS).
        closeOnSignals(logger, tserver, config.tserverHandoverMs);
        await tserver.start();
      }),
    );
}
