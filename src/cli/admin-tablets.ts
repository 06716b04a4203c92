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

interface MergeAnswer {
  table: string;
  merged: number;
  tablet: string | null;
  cancelled: number;
  tablets: number;
}

export function registerTabletCommands(table: Command): void {
  table
    .command('merge')
    .description('Merge the tablets of a row range (default: the whole table) into one.')
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--start <row>', 'first row (inclusive; text, or 0x and its bytes in hex)')
    .option('--end <row>', 'last row (inclusive; text, or 0x and its bytes in hex)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
The tablets overlapping the range are gathered on one tablet server (moves cancel nothing), which lets
the compactions running on them finish for up to EXC_MERGE_WAIT_MS (30 s; no new one starts on them),
cancels those left, and merges them in one metadata change: the merged tablet shares their files
(nothing is rewritten). Refused while a user compaction is pending on only some of them. Tables merge
small neighbours by themselves with the setting mergeBelow.
${examples(['excompact admin table merge events', 'excompact admin table merge events --start g --end p'])}`,
    )
    .action(
      action(async (name: string, opts: JsonFlag & { start?: string; end?: string }, cmd: Command) => {
        const start = opts.start === undefined ? undefined : parseRow(opts.start, '--start');
        const end = opts.end === undefined ? undefined : parseRow(opts.end, '--end');
        const answer = await withCluster(cmd, (c) =>
          c.meta.call<MergeAnswer>('POST', `/v1/tables/${encodeURIComponent(name)}/merge`, {
            ...(start === undefined ? {} : { startRowHex: start.toString('hex') }),
            ...(end === undefined ? {} : { endRowHex: end.toString('hex') }),
          }),
        );
        if (opts.json) return printJson(answer);
        process.stdout.write(
          answer.merged === 0
            ? `table ${answer.table}: nothing to merge in that range (${answer.tablets} tablets)\n`
            : `table ${answer.table}: merged ${answer.merged} tablets into ${answer.tablet}` +
                (answer.cancelled > 0 ? `, ${answer.cancelled} running compaction(s) cancelled` : '') +
                `; ${answer.tablets} tablets\n`,
        );
      }),
    );

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
