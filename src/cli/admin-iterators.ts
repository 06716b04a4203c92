/** `excompact admin table iterator add|list|remove`: a table's iterators (combiners and filters). */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import type { TableInfo } from '../meta/views.js';
import { TABLE_ITERATOR_TYPES, validateTableIterators, type TableIterator } from '../table-iterators.js';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster, type Cluster } from './connect.js';
import { action } from './exit.js';
import { nonEmpty } from './flags.js';
import { printJson, printTable } from './format.js';

const tablePath = (name: string): string => `/v1/tables/${encodeURIComponent(name)}`;

async function iteratorsOf(c: Cluster, table: string): Promise<TableIterator[]> {
  const { table: info } = await c.meta.call<{ table: TableInfo }>('GET', `${tablePath(table)}?limit=0`);
  return info.config.iterators;
}

/** One change, made by the manager to the iterators as committed (src/manager/iterator-api.ts). */
async function changeIterators(
  c: Cluster,
  table: string,
  change: { add: TableIterator } | { remove: string },
): Promise<void> {
  await c.meta.call<TableInfo>('POST', `${tablePath(table)}/iterators`, change);
}

export function registerIteratorCommands(table: Command): void {
  const iterator = table
    .command('iterator')
    .description('Add, list or remove table iterators: combiners and filters at every scan and compaction.');

  iterator
    .command('add')
    .description('Add a table iterator (it holds for what is scanned and reserved from now on).')
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .argument('<name>', "the iterator's name in the table", nonEmpty('the iterator name'))
    .argument('<options>', 'JSON: {"type": ..., and its options}')
    .addHelpText(
      'after',
      `
Types: sum, min, max, latest {"columns":[{"family":..,"qualifier":..}]} (values: decimal integers);
dropFamily {"families":[..]}; dropQualifierPrefix {"prefixes":[..]}; dropValuePrefix {"prefixes":[..]};
keepTimestamps {"from":..,"to":..}; ageOff {"families":[..],"ttlMs":..}; versions {"families":[..],"versions":..}.
Combined cells are combined in scans and in compactions of all of a tablet's files.
${examples([
  `excompact admin table iterator add events counts '{"type":"sum","columns":[{"family":"count"}]}'`,
  `excompact admin table iterator add events tmp '{"type":"ageOff","families":["tmp"],"ttlMs":86400000}'`,
])}`,
    )
    .action(
      action(async (name: string, iteratorName: string, options: string, _opts: unknown, cmd: Command) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(options);
        } catch (err) {
          throw new ExcError(
            'BAD_REQUEST',
            `iterator ${iteratorName}: options are not JSON: ${(err as Error).message}`,
          );
        }
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
          throw new ExcError(
            'BAD_REQUEST',
            `iterator ${iteratorName}: options must be a JSON object with a "type" (${TABLE_ITERATOR_TYPES.join(', ')})`,
          );
        // Checked here first, to name the option that is wrong before anything is sent.
        const [added] = validateTableIterators([{ ...parsed, name: iteratorName }]);
        await withCluster(cmd, (c) => changeIterators(c, name, { add: added! }));
        process.stdout.write(`added iterator ${iteratorName} to table ${name}\n`);
      }),
    );

  iterator
    .command('list')
    .description("List a table's iterators, in the order they were added.")
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin table iterator list events',
        'excompact admin table iterator list events --json',
      ]),
    )
    .action(
      action(async (name: string, opts: JsonFlag, cmd: Command) => {
        const list = await withCluster(cmd, (c) => iteratorsOf(c, name));
        if (opts.json) return printJson({ iterators: list });
        printTable(
          ['NAME', 'TYPE', 'OPTIONS'],
          list.map(({ name: n, type, ...rest }) => [n, type, JSON.stringify(rest)]),
        );
      }),
    );

  iterator
    .command('remove')
    .description('Remove a table iterator (running compactions keep the settings they were reserved with).')
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .argument('<name>', "the iterator's name", nonEmpty('the iterator name'))
    .addHelpText('after', examples(['excompact admin table iterator remove events counts']))
    .action(
      action(async (name: string, iteratorName: string, _opts: unknown, cmd: Command) => {
        await withCluster(cmd, (c) => changeIterators(c, name, { remove: iteratorName }));
        process.stdout.write(`removed iterator ${iteratorName} from table ${name}\n`);
      }),
    );
}
