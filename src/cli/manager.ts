/**
 * `excompact manager`: the metadata store, tablet assignment, garbage collection and the admin API.
 */
import type { Command } from 'commander';
import { action } from './exit.js';
import { serverOptions, type ServerFlags } from './flags.js';

export function registerManager(program: Command): void {
  serverOptions(
    program
      .command('manager')
      .description('Run a manager: metadata store, tablet assignment, garbage collection, admin API.')
      .option('--data-dir <dir>', 'directory of the metadata store (EXC_DATA_DIR)'),
  )
    .addHelpText(
      'after',
      `
A second manager started against the same ZooKeeper waits as a standby and takes over when the active
one dies. Both must see the same data directory (it holds the SQLite metadata store).

Exit codes: 0 stopped by SIGTERM, 1 bad configuration, 2 ZooKeeper unreachable at start. A manager whose
ZooKeeper session expires stops writing at once and joins the election again with a new session: it does
not exit.

Examples:
  EXC_SECRET_FILE=/etc/excompact/secret EXC_ZK=zk1:2181 excompact manager --port 9100 --data-dir /var/lib/excompact
`,
    )
    .action(
      action(async (flags: ServerFlags & { dataDir?: string }, cmd: Command) => {
        const [{ Manager }, { openObjectStore }, { closeOnSignals, serverSetup }] = await Promise.all([
          import('../manager/manager.js'),
          import('../storage/index.js'),
          import('./server-setup.js'),
        ]);
        const { config, secret, logger } = serverSetup(cmd, flags, 'manager', { dataDir: flags.dataDir });
        const manager = new Manager({
          ...config,
          secret,
          logger,
          objectStore: openObjectStore(config, logger),
        });
        closeOnSignals(logger, manager);
        await manager.start().catch((err: unknown) => {
          // A SIGTERM while standing by aborts start(); that is a clean stop, handled above.
          if (manager.state === 'stopping' || manager.state === 'stopped') return;
          throw err;
        });
      }),
    );
}
