/**
 * `excompact local`: what `npm start` runs — a whole cluster on one machine, on embedded defaults.
 *
 * A ZooKeeper it starts itself (unless EXC_ZK names one), a local-directory object store under ./data
 * (or S3 with --s3), a manager, two tablet servers, two queues (`small`, `large`) with two compactors each,
 * a table `demo` routed to both by size, and a workload that ingests continuously. It prints where
 * everything is and, every few seconds, a one-screen summary. Ctrl-C stops everything cleanly.
 */
import type { Command } from 'commander';
import { action } from './exit.js';
import { intOption } from './flags.js';
import type { LocalFlags } from './local-cluster.js';

export function registerLocal(program: Command): void {
  program
    .command('local')
    .description(
      'Run a whole cluster locally on embedded defaults, with a demo workload (what `npm start` runs).',
    )
    .option(
      '--data-dir <dir>',
      'where ZooKeeper, the metadata store, the object store, the secret and logs go',
      './data',
    )
    .option(
      '--zk-port <port>',
      'port of the embedded ZooKeeper (default: 2181 if free, else any)',
      intOption('--zk-port', 1, 65535),
    )
    .option('--s3', 'keep tablet files in S3: EXC_STORE/EXC_S3_* when set, else an embedded S3 server')
    .option(
      '--postgres',
      "keep the manager's metadata in PostgreSQL: EXC_META when set, else a local server (Debian's package)",
    )
    .option('--tservers <n>', 'tablet servers', intOption('--tservers', 1, 16), 2)
    .option('--compactors <n>', 'compactors per queue', intOption('--compactors', 1, 16), 2)
    .option('--no-workload', 'do not ingest demo data')
    .option(
      '--monitor-port <port>',
      'port of the monitor page on 127.0.0.1 (default 9990 if free, else any)',
      intOption('--monitor-port', 0, 65535),
      9990,
    )
    .option(
      '--summary-every <ms>',
      'how often to print the summary',
      intOption('--summary-every', 250, 600_000),
      3_000,
    )
    .addHelpText(
      'after',
      '\nExamples:\n  npm start\n  npm start -- --s3\n  npm start -- --postgres\n  excompact local --data-dir /tmp/exc --tservers 3 --compactors 1\n',
    )
    .action(
      action(async (flags: LocalFlags, cmd: Command) => {
        // The whole local cluster's code is loaded only when it runs.
        const { runLocal } = await import('./local-cluster.js');
        await runLocal(flags, cmd);
      }),
    );
}
