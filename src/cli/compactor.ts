/**
 * `excompact compactor <queue>` (also `compactor <queue>`): runs compactions for one queue.
 */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { EXIT_QUEUE_DELETED, EXIT_SICK } from '../compactor/exit-codes.js';
import { action } from './exit.js';
import { intOption, nonEmpty, serverOptions, type ServerFlags } from './flags.js';

interface CompactorFlags extends ServerFlags {
  concurrency: number;
  grace: number;
  longPoll: number;
  progressEvery: number;
  throughput?: number;
}

export function registerCompactor(program: Command): void {
  serverOptions(
    program
      .command('compactor')
      .description('Run a compactor for one queue: find work, reserve it, compact, commit.')
      .argument(
        '<queue>',
        'the queue to work for (see `excompact admin queue list`)',
        nonEmpty('the queue name'),
      )
      .option(
        '--concurrency <n>',
        'compactions at once (more than 1: each on a thread of a pool started with the compactor)',
        intOption('--concurrency', 1),
        1,
      )
      .option(
        '--grace <ms>',
        'on SIGTERM, let running jobs finish for this long before releasing them',
        intOption('--grace', 0),
        0,
      )
      .option(
        '--long-poll <ms>',
        'how long an idle request for work waits on the manager',
        intOption('--long-poll', 100),
        15_000,
      )
      .option(
        '--progress-every <ms>',
        'report progress to the tablet server this often',
        intOption('--progress-every', 50),
        2_000,
      )
      .option(
        '--throughput <bytes/s>',
        'limit how fast compactions read their inputs (default: unlimited)',
        intOption('--throughput', 1),
      ),
  )
    .addHelpText(
      'after',
      `
Exit codes: 0 stopped by SIGTERM (running jobs released), 1 bad configuration or no such queue,
2 ZooKeeper unreachable, ${EXIT_QUEUE_DELETED} the queue was deleted, ${EXIT_SICK} its jobs kept failing (EXC_COMPACTOR_EXIT_AFTER in a
row: replace it). With EXC_QUEUE_GONE_EXIT_CODE set, a
deleted queue and a queue missing at start both exit with that code.

Examples:
  compactor small
  EXC_STORE=s3://bucket/excompact excompact compactor large --concurrency 2 --grace 30000
`,
    )
    .action(
      action(async (queue: string, flags: CompactorFlags, cmd: Command) => {
        const [
          { Compactor },
          { throttleReads },
          { openObjectStore },
          { closeOnSignals, serverSetup },
          { CompactionThreads },
        ] = await Promise.all([
          import('../compactor/compactor.js'),
          import('../compactor/throttle.js'),
          import('../storage/index.js'),
          import('./server-setup.js'),
          import('../compactor/compaction-thread.js'),
        ]);
        const { config, secret, logger } = serverSetup(cmd, flags, 'compactor');
        const opened = openObjectStore(config, logger);
        const store = flags.throughput ? throttleReads(opened, flags.throughput) : opened;
        // More than one job: each on a thread of a pool started now, so N jobs use N cores. Not with
        // --throughput, whose throttle wraps this thread's store.
        const threads =
          flags.concurrency > 1 && !flags.throughput
            ? new CompactionThreads(config, flags.concurrency, logger)
            : undefined;
        threads?.warm();
        const compactor = new Compactor({
          ...config,
          queue,
          secret,
          store,
          logger,
          concurrency: flags.concurrency,
          ...(threads ? { compact: threads.compact } : {}),
          graceMs: flags.grace,
          longPollMs: flags.longPoll,
          progressEveryMs: flags.progressEvery,
        });
        compactor.on('exit', (code) => process.exit(code));
        closeOnSignals(logger, compactor, flags.grace);
        await compactor.start().catch((err: unknown) => {
          // A queue deleted while this compactor was down (a container restarted after `admin queue
          // delete`) ends it the way a deletion while running does, when a code is configured for that:
          // under a restart policy, exiting 1 here would restart it forever.
          if (
            config.queueGoneExitCode === undefined ||
            !(err instanceof ExcError && err.code === 'UNKNOWN_QUEUE')
          )
            throw err;
          logger.warn({ queue }, `queue ${queue} does not exist: stopping`);
          process.exit(config.queueGoneExitCode);
        });
      }),
    );
}
