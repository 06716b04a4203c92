/** `excompact admin table offline|online`: take a table out of service and bring it back. */
import type { Command } from 'commander';
import type { TableInfo } from '../meta/views.js';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { nonEmpty } from './flags.js';
import { printJson } from './format.js';

export function registerTableStateCommands(table: Command): void {
  table
    .command('offline')
    .description('Take a table offline: its tablets are hosted nowhere and its compactions are cancelled.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Its tablet servers cancel the compactions running on its tablets (their compactors stop within about a
second), remove its queue entries and let its tablets go; nothing is queued for it while it is offline.
Scans and ingest answer TABLE_OFFLINE. Its files, settings and pending user compactions are kept.
${examples(['excompact admin table offline events', 'excompact admin table online events'])}`,
    )
    .action(
      action(async (name: string, opts: JsonFlag, cmd: Command) => {
        const answer = await withCluster(cmd, (c) =>
          c.meta.call<TableInfo & { cancelled: number }>(
            'POST',
            `/v1/tables/${encodeURIComponent(name)}/offline`,
          ),
        );
        if (opts.json) return printJson(answer);
        process.stdout.write(
          `table ${answer.name} is offline` +
            (answer.cancelled > 0 ? `: ${answer.cancelled} running compaction(s) cancelled` : '') +
            '\n',
        );
      }),
    );

  table
    .command('online')
    .description('Bring an offline table back: its tablets are hosted again and its work goes on.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Its tablets are assigned on the manager's next pass (asked for at once); compactions reserved before it
went offline are cancelled by their tablet's new host, and its pending user compactions go on.
${examples(['excompact admin table online events'])}`,
    )
    .action(
      action(async (name: string, opts: JsonFlag, cmd: Command) => {
        const answer = await withCluster(cmd, (c) =>
          c.meta.call<TableInfo>('POST', `/v1/tables/${encodeURIComponent(name)}/online`),
        );
        if (opts.json) return printJson(answer);
        process.stdout.write(`table ${answer.name} is online\n`);
      }),
    );
}
