/** `excompact admin table …`: create, list, inspect, configure, compact and delete tables. */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { parseConfigAssignments } from '../meta/table-config.js';
import { isParked } from '../meta/tablet.js';
import { parseSelector } from '../meta/selectors.js';
import type { TableInfo, TabletView } from '../meta/views.js';
import { sleep } from '../retry.js';
import { parseRow } from '../row-text.js';
import { collect, examples, type JsonFlag } from './admin-common.js';
import { registerIteratorCommands } from './admin-iterators.js';
import { registerSummaryCommand } from './admin-summaries.js';
import { registerTableStateCommands } from './admin-table-state.js';
import { registerTabletCommands } from './admin-tablets.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { intOption, nonEmpty } from './flags.js';
import { age, bytes, printJson, printTable, progressBar, rowText } from './format.js';

export function registerTables(admin: Command): void {
  const table = admin
    .command('table')
    .description('Create, list, inspect, configure, compact and delete tables.');

  table
    .command('create')
    .description('Create a table, optionally pre-split and configured.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--split <row>', 'a split point (repeat for more; text, or 0x and its bytes in hex)', collect)
    .option('--splits <rows>', 'split points, comma-separated (text, or 0x and hex bytes, each)')
    .option(
      '--splits-file <path>',
      'split points, one a line, in any order (text, or 0x and hex bytes; blank lines skipped)',
    )
    .option('--config <key=value>', 'a table setting (repeat; see `table config --help`)', collect)
    .option('--if-not-exists', 'succeed (and change nothing) when the table already exists')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin table create events --splits g,p --config queues=small:64M,large',
        'excompact admin table create logs --split m --config ttl=7d',
        'excompact admin table create blobs --splits 0x40,0x80,0xc0',
        'excompact admin table create big --splits-file splits.txt',
      ]),
    )
    .action(
      action(
        async (
          name: string,
          opts: JsonFlag & {
            split?: string[];
            splits?: string;
            splitsFile?: string;
            config?: string[];
            ifNotExists?: boolean;
          },
          cmd: Command,
        ) => {
          let splits = [
            ...(opts.split ?? []).map((s) => splitPoint(s, '--split')),
            ...(opts.splits === undefined
              ? []
              : opts.splits.split(',').map((s) => splitPoint(s, '--splits'))),
          ];
          if (opts.splitsFile !== undefined)
            splits = sortedUnique([...splits, ...readSplitsFile(opts.splitsFile)]);
          const config = parseConfigAssignments(opts.config ?? []);
          // In hex: a split point is bytes, which text would not always carry (0x…, row-text.ts).
          const splitsHex = splits.map((s) => s.toString('hex'));
          const created = await withCluster(cmd, (c) =>
            c.meta.call<TableInfo>('POST', '/v1/tables', { name, splitsHex, config }),
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
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--limit <n>', 'show at most this many tablets (0: every one)', intOption('--limit', 0), 1_000)
    .option('--after <tablet>', 'start after this tablet (the `next` a shorter listing ended with)')
    .option('--json', 'print JSON (with `next` when more tablets follow)')
    .addHelpText(
      'after',
      examples([
        'excompact admin table info events',
        'excompact admin table info events --limit 0 --json',
        'excompact admin table info events --after "0001;6d"',
      ]),
    )
    .action(
      action(async (name: string, opts: JsonFlag & { limit: number; after?: string }, cmd: Command) => {
        await withCluster(cmd, async (c) => {
          type Page = { table: TableInfo; tablets: TabletView[]; next?: string };
          const all: TabletView[] = [];
          let page: Page | undefined;
          let shown = 0;
          let after = opts.after;
          // Pages of the tablets view (a table may have 100,000 tablets), until the limit.
          do {
            const want = opts.limit === 0 ? PAGE : Math.min(PAGE, opts.limit - shown);
            const query = new URLSearchParams({
              limit: String(want),
              ...(after === undefined ? {} : { after }),
            });
            page = await c.meta.call<Page>(
              'GET',
              `/v1/tables/${encodeURIComponent(name)}?${query.toString()}`,
            );
            shown += page.tablets.length;
            after = page.next;
            // Text goes out a page at a time; JSON once, whole.
            if (opts.json) all.push(...page.tablets);
            else printTabletPage(page, shown === page.tablets.length);
          } while (page.next !== undefined && (opts.limit === 0 || shown < opts.limit));
          const next = page.next;
          if (opts.json)
            return printJson({ table: page.table, tablets: all, ...(next === undefined ? {} : { next }) });
          if (next !== undefined) {
            process.stdout.write(
              `\n${shown} tablets shown; more follow: --after ${JSON.stringify(next)} for the next, --limit 0 for all\n`,
            );
          }
        });
      }),
    );

  table
    .command('config')
    .description('Change table settings.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
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
  compression=zstd         block codec of new files (none, deflate, lz4, zstd)
  blockSize=64K            uncompressed size of a data block in new files
  splitAbove=1G            split a larger system job by row range across compactors
  maxSplits=8              at most this many sub-jobs per split job (1: never split)
  splitThreshold=1G        a tablet holding more than this splits in two, near the middle of its data
  mergeBelow=64M           neighbouring tablets holding less than this together merge (empty: never)
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

  registerTabletCommands(table);
  registerTableStateCommands(table);
  registerSummaryCommand(table);
  registerIteratorCommands(table);

  table
    .command('delete')
    .description('Delete a table: its tablets are unloaded, its files collected, its compactions cancelled.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .addHelpText('after', examples(['excompact admin table delete events']))
    .action(
      action(async (name: string, _opts: unknown, cmd: Command) => {
        await withCluster(cmd, (c) => c.meta.call('DELETE', `/v1/tables/${encodeURIComponent(name)}`));
        process.stdout.write(`deleted table ${name}\n`);
      }),
    );

  table
    .command('compact')
    .description(
      'Compact the files of the table (or of a row range): all of them, or those selectors choose; optionally through filters.',
    )
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--start <row>', 'first row (inclusive; text, or 0x and its bytes in hex)')
    .option('--end <row>', 'last row (inclusive; text, or 0x and its bytes in hex)')
    .option('--filter <name:json>', 'a built-in filter with JSON options (repeat for more)', collect)
    .option(
      '--select <selector>',
      'rewrite only the files it chooses (repeat: the files every one chooses); see below',
      collect,
    )
    .option(
      '--queue <queue>',
      "send its jobs to this queue whatever their size (default: the table's routes)",
    )
    .option('--wait', 'show progress and return when every tablet in the range is done')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Filters: dropRowPrefix {"prefixes":[...]}, keepRowPrefix {"prefixes":[...]}, dropFamily {"families":[...]},
keepFamily {"families":[...]}, keepRowRange {"start":..,"end":..}.
Selectors: all (the default); smaller-than:<size> (files smaller than 64M, 1G, ...); older-than:<age>
(files whose newest entry is older than 7d, 12h, ...); deletes-above:<ratio> (every file of a tablet
whose files hold more than ratio delete markers per entry, so they are dropped). Not with --filter.
${examples([
  'excompact admin table compact events --wait',
  'excompact admin table compact events --select smaller-than:16M',
  'excompact admin table compact events --select deletes-above:0.25 --wait',
  `excompact admin table compact events --start a --end m --filter 'dropRowPrefix:{"prefixes":["tmp_"]}' --wait`,
  'excompact admin table compact events --queue rewrites',
])}`,
    )
    .action(
      action(
        async (
          name: string,
          opts: JsonFlag & {
            start?: string;
            end?: string;
            filter?: string[];
            select?: string[];
            queue?: string;
            wait?: boolean;
          },
          cmd: Command,
        ) => {
          const filters = (opts.filter ?? []).map(parseFilterFlag);
          const select = (opts.select ?? []).map(parseSelector);
          const start = opts.start === undefined ? undefined : parseRow(opts.start, '--start');
          const end = opts.end === undefined ? undefined : parseRow(opts.end, '--end');
          await withCluster(cmd, async (c) => {
            const started = await c.meta.call<{ id: string; tablets: string[] }>(
              'POST',
              `/v1/tables/${encodeURIComponent(name)}/compact`,
              {
                ...(start === undefined ? {} : { startRowHex: start.toString('hex') }),
                ...(end === undefined ? {} : { endRowHex: end.toString('hex') }),
                filters,
                ...(select.length === 0 ? {} : { select }),
                ...(opts.queue === undefined ? {} : { queue: opts.queue }),
              },
            );
            if (!opts.wait) {
              if (opts.json) printJson(started);
              else
                process.stdout.write(
                  `compaction ${started.id} requested for ${started.tablets.length} tablet(s)\n` +
                    `follow it with: excompact admin compactions status ${started.id} --wait\n`,
                );
              return;
            }
            const total = started.tablets.length;
            const tty = process.stderr.isTTY;
            for (;;) {
              const status = await c.meta.call<{ remaining: string[]; cancelled?: string[]; done: boolean }>(
                'GET',
                `/v1/tables/${encodeURIComponent(name)}/compactions/${started.id}`,
              );
              const done = total - status.remaining.length;
              const line = `compaction ${started.id}: ${done}/${total} tablets done`;
              if (tty) process.stderr.write(`\r${progressBar(total === 0 ? 1 : done / total)} ${line}\x1b[K`);
              if (status.done) {
                if (tty) process.stderr.write('\n');
                const cancelled = status.cancelled?.length ?? 0;
                if (cancelled > 0) {
                  throw new ExcError(
                    'CONFLICT',
                    `compaction ${started.id} was cancelled by an admin on ${cancelled} of ${total} tablet(s)`,
                  );
                }
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

/** Tablets asked for at once by `table info` (the manager's largest page). */
const PAGE = 10_000;

/** One page of `table info`: the table's header before the first. */
function printTabletPage(info: { table: TableInfo; tablets: TabletView[] }, first: boolean): void {
  if (first) {
    process.stdout.write(
      `table ${info.table.name} (id ${info.table.id}, ${info.table.state})\nconfig ${JSON.stringify(info.table.config)}\n\n`,
    );
  }
  printTable(
    ['TABLET', 'END ROW', 'HOST', 'FILES', 'BYTES', 'ENTRIES', 'COMPACTING', 'PARKED'],
    info.tablets.map((t) => [
      t.tablet,
      rowText(t.endRowHex),
      t.loc?.server ??
        (t.future
          ? `(loading on ${t.future.server})`
          : info.table.state === 'offline'
            ? '(offline)'
            : '(unassigned)'),
      t.files.length,
      bytes(t.files.reduce((s, f) => s + f.size, 0)),
      t.files.reduce((s, f) => s + f.entries, 0),
      t.reservations.length,
      t.failures.filter((f) => isParked(f, info.table.config.maxAttempts)).length,
    ]),
  );
}

/** A file's split points, one a line (`\r\n` too); blank lines skipped; a bad one named by its line. */
function readSplitsFile(path: string): Buffer[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ExcError(
      'BAD_REQUEST',
      `--splits-file ${path}: ${code === 'ENOENT' ? 'no such file' : String(code ?? err)}`,
    );
  }
  const out: Buffer[] = [];
  text.split('\n').forEach((line, i) => {
    const point = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (point !== '') out.push(splitPoint(point, `--splits-file ${path} line ${i + 1}`));
  });
  return out;
}

/** Sorted as bytes (the order of rows), each once. */
function sortedUnique(points: Buffer[]): Buffer[] {
  const sorted = [...points].sort((a, b) => Buffer.compare(a, b));
  return sorted.filter((p, i) => i === 0 || !p.equals(sorted[i - 1]!));
}

function splitPoint(text: string, flag: string): Buffer {
  const row = parseRow(text, flag);
  if (row.length === 0) throw new ExcError('BAD_REQUEST', `${flag}: a split point cannot be empty`);
  return row;
}
