/**
 * `excompact tserver`: hosts tablets, serves ingest and scan, selects compactions, runs reservations.
 */
import type { Command } from 'commander';
import { requireSecret } from '../config.js';
import { onShutdownSignals } from '../lifecycle.js';
import { createLogger } from '../log.js';
import { openObjectStore } from '../storage/index.js';
import { TabletServer } from '../tserver/tserver.js';
import { configFrom } from './connect.js';
import { action, EXIT_LOST_LOCK } from './exit.js';
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
Exit codes: 0 stopped by SIGTERM, 1 bad configuration, 2 ZooKeeper unreachable, ${EXIT_LOST_LOCK} lost its ZooKeeper session.

Examples:
  EXC_SECRET_FILE=/etc/excompact/secret EXC_ZK=zk1:2181 EXC_STORE=s3://bucket/excompact excompact tserver --port 9200
`,
    )
    .action(
      action(async (flags: ServerFlags, cmd: Command) => {
        const config = configFrom(cmd, {
          port: flags.port,
          bindHost: flags.bind,
          advertiseHost: flags.advertise,
        });
        const secret = requireSecret(config);
        const logger = createLogger({ name: 'tserver', level: config.logLevel });
        const store = openObjectStore(config, logger);
        const tserver = new TabletServer({ ...config, secret, store, logger });
        tserver.on('fatal', () => {
          void tserver.close().finally(() => process.exit(EXIT_LOST_LOCK));
        });
        onShutdownSignals(logger, async () => {
          await tserver.close();
          return 0;
        });
        await tserver.start();
      }),
    );
}
