/**
 * `excompact admin …`: queues, compactors, compactions and tables — what operators type every day.
 * Every listing takes --json; human tables otherwise.
 */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { parseConfigAssignments } from '../meta/table-config.js';
import { isParked } from '../meta/tablet.js';
import type {
  CompactorView,
  ParkedCompaction,
  RunningCompaction,
  TableInfo,
  TabletView,
} from '../meta/views.js';
import type { QueueInfo } from '../queue/registry.js';
import { sleep } from '../retry.js';
import { withCluster } from './connect.js';
import { registerStore } from './store.js';
import { action } from './exit.js';
import { intOption } from './flags.js';
import { age, bytes, printJson, printTable, rowText } from './format.js';

interface JsonFlag {
  json?: boolean;
}

const examples = (lines: string[]): string => `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}\n`;

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function registerAdmin(program: Command): void {
  const admin = program
    .command('admin')
    .description('Administer queues, compactors, compactions and tables.');
  registerQueues(admin);
  registerCompactors(admin);
  registerCompactions(admin);
  registerTables(admin);
  registerStore(admin);
}

// --- queues -----------------------------------------------------------------------------------------------

function registerQueues(admin: Command): void {
  const queue = admin.command('queue').description('Create, list, inspect and delete compaction queues.');

  queue
    .command('create')
    .description('Create a queue: compactors started with `compactor <name>` work for it.')
    .argument('<name>', 'queue name: letters, digits, _ . - (starting with a letter)')
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
    .argument('<name>')
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
        printRunning(info.running);
        process.stdout.write(`\nparked (${info.parked.length}):\n`);
        printParked(info.parked);
        process.stdout.write(`\ncompactors (${info.compactors.length}):\n`);
        printCompactors(info.compactors);
      }),
    );

  queue
    .command('delete')
    .description('Delete a queue: its compactors exit, its entries go, its reservations are cancelled.')
    .argument('<name>')
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

// --- compactors and compactions --------------------------------------------------------------------------------

function printRunning(running: RunningCompaction[]): void {
  printTable(
    ['ECID', 'TABLE', 'TABLET', 'QUEUE', 'COMPACTOR', 'AGE', 'READ', 'WRITTEN'],
    running.map((r) => [
      r.ecid,
      r.table,
      r.tablet,
      r.queue ?? r.queueId,
      r.compactor.split('/').pop(),
      age(r.ageMs),
      r.progress ? r.progress.entriesRead : null,
      r.progress ? r.progress.entriesWritten : null,
    ]),
  );
}

function printParked(parked: ParkedCompaction[]): void {
  printTable(
    ['ID', 'TABLE', 'TABLET', 'QUEUE', 'ATTEMPTS', 'LAST ERROR'],
    parked.map((p) => [p.id, p.table, p.tablet, p.queue ?? p.queueId, p.attempts, p.lastError.slice(0, 100)]),
  );
}

function printCompactors(compactors: CompactorView[]): void {
  printTable(
    ['QUEUE', 'COMPACTOR', 'HOST', 'PID', 'UP', 'STATUS'],
    compactors.map((c) => [
      c.queue,
      c.path.split('/').pop(),
      c.host,
      c.pid,
      c.started ? age(Date.now() - c.started) : null,
      c.status,
    ]),
  );
}

function registerCompactors(admin: Command): void {
  admin
    .command('compactors')
    .description('Live compactors.')
    .command('list')
    .description('List live compactors (from their ZooKeeper nodes).')
    .option('--queue <name>', 'only this queue')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples(['excompact admin compactors list', 'excompact admin compactors list --queue small --json']),
    )
    .action(
      action(async (opts: JsonFlag & { queue?: string }, cmd: Command) => {
        const { compactors } = await withCluster(cmd, (c) =>
          c.meta.call<{ compactors: CompactorView[] }>(
            'GET',
            `/v1/compactors${opts.queue ? `?queue=${encodeURIComponent(opts.queue)}` : ''}`,
          ),
        );
        if (opts.json) return printJson(compactors);
        printCompactors(compactors);
      }),
    );
}

function registerCompactions(admin: Command): void {
  const compactions = admin.command('compactions').description('Running and parked compactions.');

  compactions
    .command('list')
    .description('List running compactions (reservations) and parked jobs.')
    .option('--queue <name>', 'only this queue')
    .option('--table <name>', 'only this table')
    .option('--state <state>', 'running or parked')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions list',
        'excompact admin compactions list --state parked --table events',
      ]),
    )
    .action(
      action(async (opts: JsonFlag & { queue?: string; table?: string; state?: string }, cmd: Command) => {
        if (opts.state && opts.state !== 'running' && opts.state !== 'parked') {
          throw new ExcError('BAD_REQUEST', `--state must be running or parked, not ${opts.state}`);
        }
        const query = new URLSearchParams(
          Object.entries({ queue: opts.queue, table: opts.table, state: opts.state }).filter(
            (e): e is [string, string] => !!e[1],
          ),
        );
        const result = await withCluster(cmd, (c) =>
          c.meta.call<{ running: RunningCompaction[]; parked: ParkedCompaction[] }>(
            'GET',
            `/v1/compactions${query.size ? `?${query.toString()}` : ''}`,
          ),
        );
        if (opts.json) return printJson(result);
        if (opts.state !== 'parked') {
          process.stdout.write(`running (${result.running.length}):\n`);
          printRunning(result.running);
        }
        if (opts.state !== 'running') {
          process.stdout.write(`${opts.state ? '' : '\n'}parked (${result.parked.length}):\n`);
          printParked(result.parked);
        }
      }),
    );

  compactions
    .command('cancel')
    .description('Cancel a running compaction; its tablet requeues the work.')
    .argument('<ecid>', 'the compaction id (ECID column of `compactions list`)')
    .addHelpText('after', examples(['excompact admin compactions cancel 01HZY3Q6W4M3V6Q7B2G8N5T0RZ']))
    .action(
      action(async (ecid: string, _opts: unknown, cmd: Command) => {
        const result = await withCluster(cmd, (c) =>
          c.meta.call<{ cancelled: boolean }>('POST', `/v1/compactions/${encodeURIComponent(ecid)}/cancel`),
        );
        process.stdout.write(result.cancelled ? `cancelled ${ecid}\n` : `${ecid} had already ended\n`);
      }),
    );

  compactions
    .command('release')
    .description('Release parked jobs so they are tried again.')
    .argument('[id]', 'a parked job (ID column of `compactions list --state parked`, or its last ECID)')
    .option('--table <name>', 'release every parked job of a table')
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions release 3f9c2a1b0d4e5f60718293a4',
        'excompact admin compactions release --table events',
      ]),
    )
    .action(
      action(async (id: string | undefined, opts: { table?: string }, cmd: Command) => {
        if (Boolean(id) === Boolean(opts.table))
          throw new ExcError('BAD_REQUEST', 'give a parked job id or --table, not both');
        const result = await withCluster(cmd, (c) =>
          c.meta.call<{ released: { tablet: string; id: string }[] }>(
            'POST',
            '/v1/compactions/release',
            id ? { id } : { table: opts.table },
          ),
        );
        process.stdout.write(
          `released ${result.released.length} parked job${result.released.length === 1 ? '' : 's'}\n`,
        );
      }),
    );
}

// --- tables ---------------------------------------------------------------------------------------------------

function registerTables(admin: Command): void {
  const table = admin
    .command('table')
    .description('Create, list, inspect, configure, compact and delete tables.');

  table
    .command('create')
    .description('Create a table, optionally pre-split and configured.')
    .argument('<name>')
    .option('--split <row>', 'a split point (repeat for more)', collect)
    .option('--splits <rows>', 'split points, comma-separated')
    .option('--config <key=value>', 'a table setting (repeat; see `table config --help`)', collect)
    .option('--if-not-exists', 'succeed (and change nothing) when the table already exists')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin table create events --splits g,p --config queues=small:64M,large',
        'excompact admin table create logs --split m --config ttl=7d',
      ]),
    )
    .action(
      action(
        async (
          name: string,
          opts: JsonFlag & { split?: string[]; splits?: string; config?: string[]; ifNotExists?: boolean },
          cmd: Command,
        ) => {
          const splits = [...(opts.split ?? []), ...(opts.splits ? opts.splits.split(',') : [])];
          const config = parseConfigAssignments(opts.config ?? []);
          const created = await withCluster(cmd, (c) =>
            c.meta.call<TableInfo>('POST', '/v1/tables', { name, splits, config }),
          ).catch((err: unknown) => {
            if (opts.ifNotExists && err instanceof ExcError && err.code === 'ALREADY_EXISTS')
              return undefined;
            throw err;
          });
          if (!created) return void process.stdout.write(`table ${name} already exists\n`);
          if (opts.json) return printJson(created);
          process.stdout.write(
            `created table ${created.name} (id ${created.id}, ${splits.length + 1} tablet${splits.length ? 's' : ''})\n`,
          );
        },
      ),
    );

  table
    .command('list')
    .description('List tables.')
    .option('--json', 'print JSON')
    .addHelpText('after', examples(['excompact admin table list', 'excompact admin table list --json']))
    .action(
      action(async (opts: JsonFlag, cmd: Command) => {
        const { tables } = await withCluster(cmd, (c) =>
          c.meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables'),
        );
        if (opts.json) return printJson(tables);
        printTable(
          ['NAME', 'ID', 'STATE', 'QUEUES', 'VERSIONS', 'TTL'],
          tables.map((t) => [
            t.name,
            t.id,
            t.state,
            t.config.queues
              .map((q) => (q.maxInputBytes ? `${q.queue}<=${bytes(q.maxInputBytes)}` : q.queue))
              .join(', ') || null,
            t.config.versions,
            t.config.ttlMs ? age(t.config.ttlMs) : null,
          ]),
        );
      }),
    );

  table
    .command('info')
    .description('Show a table: its settings and tablets with hosts, files and bytes.')
    .argument('<name>')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples(['excompact admin table info events', 'excompact admin table info events --json']),
    )
    .action(
      action(async (name: string, opts: JsonFlag, cmd: Command) => {
        const info = await withCluster(cmd, (c) =>
          c.meta.call<{ table: TableInfo; tablets: TabletView[] }>(
            'GET',
            `/v1/tables/${encodeURIComponent(name)}`,
          ),
        );
        if (opts.json) return printJson(info);
        process.stdout.write(
          `table ${info.table.name} (id ${info.table.id}, ${info.table.state})\nconfig ${JSON.stringify(info.table.config)}\n\n`,
        );
        printTable(
          ['TABLET', 'END ROW', 'HOST', 'FILES', 'BYTES', 'ENTRIES', 'COMPACTING', 'PARKED'],
          info.tablets.map((t) => [
            t.tablet,
            rowText(t.endRowHex),
            t.loc?.server ?? (t.future ? `(loading on ${t.future.server})` : '(unassigned)'),
            t.files.length,
            bytes(t.files.reduce((s, f) => s + f.size, 0)),
            t.files.reduce((s, f) => s + f.entries, 0),
            t.reservations.length,
            t.failures.filter((f) => isParked(f, info.table.config.maxAttempts)).length,
          ]),
        );
      }),
    );

  table
    .command('config')
    .description('Change table settings.')
    .argument('<name>')
    .argument('<settings...>', 'key=value pairs')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Settings:
  queues=small:64M,large   route jobs by total input size: the first queue they fit (the last may be unbounded)
  ratio=3                  compact a set of files when its total size is at least ratio x its largest file
  maxFiles=10              at most this many files per job
  fileLimit=30             beyond this many files, compact the smallest regardless of the ratio
  versions=1               versions of a cell to keep
  ttl=7d                   drop entries older than this (ms, s, m, h, d)
  maxAttempts=3            failed attempts after which a job is parked
${examples(['excompact admin table config events queues=small:64M,large ratio=2', 'excompact admin table config logs ttl=30d versions=3'])}`,
    )
    .action(
      action(async (name: string, settings: string[], opts: JsonFlag, cmd: Command) => {
        const config = parseConfigAssignments(settings);
        const updated = await withCluster(cmd, (c) =>
          c.meta.call<TableInfo>('POST', `/v1/tables/${encodeURIComponent(name)}/config`, { config }),
        );
        if (opts.json) return printJson(updated);
        process.stdout.write(`table ${updated.name}: ${JSON.stringify(updated.config)}\n`);
      }),
    );

  table
    .command('delete')
    .description('Delete a table: its tablets are unloaded, its files collected, its compactions cancelled.')
    .argument('<name>')
    .addHelpText('after', examples(['excompact admin table delete events']))
    .action(
      action(async (name: string, _opts: unknown, cmd: Command) => {
        await withCluster(cmd, (c) => c.meta.call('DELETE', `/v1/tables/${encodeURIComponent(name)}`));
        process.stdout.write(`deleted table ${name}\n`);
      }),
    );

  table
    .command('compact')
    .description('Compact all files of the table (or of a row range), optionally through filters.')
    .argument('<name>')
    .option('--start <row>', 'first row (inclusive)')
    .option('--end <row>', 'last row (inclusive)')
    .option('--filter <name:json>', 'a built-in filter with JSON options (repeat for more)', collect)
    .option('--wait', 'show progress and return when every tablet in the range is done')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Filters: dropRowPrefix {"prefixes":[...]}, keepRowPrefix {"prefixes":[...]}, dropFamily {"families":[...]},
keepFamily {"families":[...]}, keepRowRange {"start":..,"end":..}.
${examples([
  'excompact admin table compact events --wait',
  `excompact admin table compact events --start a --end m --filter 'dropRowPrefix:{"prefixes":["tmp_"]}' --wait`,
])}`,
    )
    .action(
      action(
        async (
          name: string,
          opts: JsonFlag & { start?: string; end?: string; filter?: string[]; wait?: boolean },
          cmd: Command,
        ) => {
          const filters = (opts.filter ?? []).map(parseFilterFlag);
          await withCluster(cmd, async (c) => {
            const started = await c.meta.call<{ id: string; tablets: string[] }>(
              'POST',
              `/v1/tables/${encodeURIComponent(name)}/compact`,
              {
                ...(opts.start === undefined ? {} : { startRow: opts.start }),
                ...(opts.end === undefined ? {} : { endRow: opts.end }),
                filters,
              },
            );
            if (!opts.wait) {
              if (opts.json) printJson(started);
              else
                process.stdout.write(
                  `compaction ${started.id} requested for ${started.tablets.length} tablet(s)\n`,
                );
              return;
            }
            const total = started.tablets.length;
            const tty = process.stderr.isTTY;
            for (;;) {
              const status = await c.meta.call<{ remaining: string[]; done: boolean }>(
                'GET',
                `/v1/tables/${encodeURIComponent(name)}/compactions/${started.id}`,
              );
              const line = `compaction ${started.id}: ${total - status.remaining.length}/${total} tablets done`;
              if (tty) process.stderr.write(`\r${line}`);
              if (status.done) {
                if (tty) process.stderr.write('\n');
                if (opts.json) printJson({ ...started, done: true });
                else process.stdout.write(`${line}\n`);
                return;
              }
              await sleep(250);
            }
          });
        },
      ),
    );
}

function parseFilterFlag(flag: string): { name: string; options?: unknown } {
  const colon = flag.indexOf(':');
  const name = colon < 0 ? flag : flag.slice(0, colon);
  if (colon < 0) return { name };
  try {
    return { name, options: JSON.parse(flag.slice(colon + 1)) };
  } catch (err) {
    throw new ExcError(
      'BAD_REQUEST',
      `--filter ${name}: options are not valid JSON: ${(err as Error).message}`,
    );
  }
}
