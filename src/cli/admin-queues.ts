/** `excompact admin queue …`: create, list, inspect and delete compaction queues. */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import type { CompactorView, ParkedCompaction, RunningCompaction } from '../meta/views.js';
import type { QueueInfo } from '../queue/registry.js';
import { examples, printCompactors, printParked, printRunning, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { intOption, nonEmpty } from './flags.js';
import { age, printJson, printTable } from './format.js';

export function registerQueues(admin: Command): void {
  const queue = admin.command('queue').description('Create, list, inspect and delete compaction queues.');

  queue
    .command('create')
    .description('Create a queue: compactors started with `compactor <name>` work for it.')
    .argument(
      '<name>',
      'queue name: letters, digits, _ . - (starting with a letter)',
      nonEmpty('the queue name'),
    )
    .option(
      '--bins <n>',
      'number of bins (spreads compactors over the queue)',
      intOption('--bins', 1, 4096),
      8,
    )
    .option('--if-not-exists', 'succeed (and change nothing) when the queue already exists')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples(['excompact admin queue create small', 'excompact admin queue create size256M --bins 16']),
    )
    .action(
      action(async (name: string, opts: JsonFlag & { bins: number; ifNotExists?: boolean }, cmd: Command) => {
        await withCluster(cmd, async (c) => {
          try {
            const q = await c.meta.call<QueueInfo>('POST', '/v1/queues', { name, bins: opts.bins });
            if (opts.json) printJson(q);
            else process.stdout.write(`created queue ${q.name} (id ${q.id}, ${q.bins} bins)\n`);
          } catch (err) {
            if (!(opts.ifNotExists && err instanceof ExcError && err.code === 'ALREADY_EXISTS')) throw err;
            process.stdout.write(`queue ${name} already exists\n`);
          }
        });
      }),
    );

  queue
    .command('list')
    .description('List queues with their queued and running jobs and live compactors.')
    .option('--json', 'print JSON')
    .addHelpText('after', examples(['excompact admin queue list', 'excompact admin queue list --json']))
    .action(
      action(async (opts: JsonFlag, cmd: Command) => {
        const { queues } = await withCluster(cmd, (c) =>
          c.meta.call<{ queues: (QueueInfo & { queued: number; running: number; compactors: number })[] }>(
            'GET',
            '/v1/queues',
          ),
        );
        if (opts.json) return printJson(queues);
        printTable(
          ['NAME', 'ID', 'BINS', 'QUEUED', 'RUNNING', 'COMPACTORS'],
          queues.map((q) => [q.name, q.id, q.bins, q.queued, q.running, q.compactors]),
        );
      }),
    );

  queue
    .command('info')
    .description('Show a queue in depth: queued entries, running reservations, parked jobs, compactors.')
    .argument('<name>', 'queue name', nonEmpty('the queue name'))
    .option('--json', 'print JSON')
    .addHelpText('after', examples(['excompact admin queue info small']))
    .action(
      action(async (name: string, opts: JsonFlag, cmd: Command) => {
        const info = await withCluster(cmd, (c) =>
          c.meta.call<{
            queue: QueueInfo;
            queued: { tablet: string; table: string; priority: number; bin: number; since: number | null }[];
            running: RunningCompaction[];
            parked: ParkedCompaction[];
            compactors: CompactorView[];
          }>('GET', `/v1/queues/${encodeURIComponent(name)}`),
        );
        if (opts.json) return printJson(info);
        const now = Date.now();
        process.stdout.write(
          `queue ${info.queue.name} (id ${info.queue.id}, ${info.queue.bins} bins)\n\nqueued (${info.queued.length}):\n`,
        );
        printTable(
          ['TABLE', 'TABLET', 'PRIORITY', 'BIN', 'WAITING'],
          info.queued.map((q) => [q.table, q.tablet, q.priority, q.bin, q.since ? age(now - q.since) : null]),
        );
        process.stdout.write(`\nrunning (${info.running.length}):\n`);
        printRunning(info.running, new Map(info.compactors.map((c) => [c.path, c.host])));
        process.stdout.write(`\nparked (${info.parked.length}):\n`);
        printParked(info.parked);
        process.stdout.write(`\ncompactors (${info.compactors.length}):\n`);
        printCompactors(info.compactors);
      }),
    );

  queue
    .command('delete')
    .description('Delete a queue: its compactors exit, its entries go, its reservations are cancelled.')
    .argument('<name>', 'queue name', nonEmpty('the queue name'))
    .option('--force', 'delete even while tables route compactions to it (their jobs for it are not queued)')
    .addHelpText(
      'after',
      examples(['excompact admin queue delete small', 'excompact admin queue delete small --force']),
    )
    .action(
      action(async (name: string, opts: { force?: boolean }, cmd: Command) => {
        const result = await withCluster(cmd, (c) =>
          c.meta.call<{ deleted: QueueInfo; entriesRemoved: number; tablesStillRouting: string[] }>(
            'DELETE',
            `/v1/queues/${encodeURIComponent(name)}${opts.force ? '?force=true' : ''}`,
          ),
        );
        process.stdout.write(
          `deleted queue ${result.deleted.name} (id ${result.deleted.id}); ${result.entriesRemoved} queued entries removed\n`,
        );
        if (result.tablesStillRouting.length > 0) {
          process.stdout.write(
            `warning: tables still routing to it: ${result.tablesStillRouting.join(', ')}\n`,
          );
        }
      }),
    );
}
