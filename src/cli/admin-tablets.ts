/** `excompact admin table split|merge`: change the shape of a table's tablets. */
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { parseRow } from '../row-text.js';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { nonEmpty } from './flags.js';
import { printJson, rowText } from './format.js';

interface SplitAnswer {
  table: string;
  splitAt: string[];
  already: string[];
  tablets: number;
}

export function registerTabletCommands(table: Command): void {
  table
    .command('split')
    .description(
      'Split tablets at rows: each row becomes the end row of a tablet. A row that already is one is no error.',
    )
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .argument('<rows...>', 'rows to split at (text, or 0x and its bytes in hex)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
The tablet holding a row is split by its tablet server in one metadata change: the daughters share the
tablet's files (nothing is rewritten), and compactions running on it go on (DESIGN.md, "Tablet splits
and merges"). Tablets also split by themselves when their data passes the table's splitThreshold.
${examples(['excompact admin table split events g p', 'excompact admin table split blobs 0x40 0x80'])}`,
    )
    .action(
      action(async (name: string, rows: string[], opts: JsonFlag, cmd: Command) => {
        const parsed = rows.map((r) => {
          const row = parseRow(r, 'a split row');
          if (row.length === 0) throw new ExcError('BAD_REQUEST', 'a split row cannot be empty');
          return row;
        });
        const answer = await withCluster(cmd, (c) =>
          c.meta.call<SplitAnswer>('POST', `/v1/tables/${encodeURIComponent(name)}/split`, {
            rowsHex: parsed.map((r) => r.toString('hex')),
          }),
        );
        if (opts.json) return printJson(answer);
        const list = (hexes: string[]) => hexes.map((h) => rowText(h)).join(', ');
        process.stdout.write(
          `table ${answer.table}: ${answer.tablets} tablets` +
            (answer.splitAt.length > 0 ? `; split at ${list(answer.splitAt)}` : '') +
            (answer.already.length > 0 ? `; already split at ${list(answer.already)}` : '') +
            '\n',
        );
      }),
    );
}
