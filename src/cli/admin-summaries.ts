/** `excompact admin table summaries`: what a table's files hold, from the figures recorded with them. */
import type { Command } from 'commander';
import type { TableSummary } from '../manager/summaries.js';
import { parseRow } from '../row-text.js';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action } from './exit.js';
import { nonEmpty } from './flags.js';
import { bytes, printJson, printTable } from './format.js';

export function registerSummaryCommand(table: Command): void {
  table
    .command('summaries')
    .description(
      "Summarize a table's data (or a row range's): entries, deletes, families, timestamps, sizes.",
    )
    .argument('<name>', 'table name', nonEmpty('the table name'))
    .option('--start <row>', 'first row (inclusive; text, or 0x and its bytes in hex)')
    .option('--end <row>', 'last row (inclusive; text, or 0x and its bytes in hex)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Read from the figures each file's record holds (written with the file), never from the files: the
entries stored, hidden versions and delete markers included. Exact for the tablets wholly inside the
range whose files are their own; the output names tablets that reach beyond the range (counted whole),
files whose counts are estimated shares (shared after a split) and files written without statistics.
${examples(['excompact admin table summaries events', 'excompact admin table summaries events --start a --end m --json'])}`,
    )
    .action(
      action(async (name: string, opts: JsonFlag & { start?: string; end?: string }, cmd: Command) => {
        const query = new URLSearchParams();
        if (opts.start !== undefined)
          query.set('startRowHex', parseRow(opts.start, '--start').toString('hex'));
        if (opts.end !== undefined) query.set('endRowHex', parseRow(opts.end, '--end').toString('hex'));
        const q = query.size > 0 ? `?${query.toString()}` : '';
        const s = await withCluster(cmd, (c) =>
          c.meta.call<TableSummary>('GET', `/v1/tables/${encodeURIComponent(name)}/summaries${q}`),
        );
        if (opts.json) return printJson(s);
        printSummary(s);
      }),
    );
}

function printSummary(s: TableSummary): void {
  const ts = (t: number | null) => (t === null ? '-' : `${t} (${new Date(t).toISOString()})`);
  printTable(
    ['FIGURE', 'VALUE'],
    [
      ['tablets', s.tablets],
      ['files', s.files],
      ['bytes', bytes(s.bytes)],
      ['entries', s.entries],
      ['deletes', s.deletes],
      ['key bytes', bytes(s.keyBytes)],
      ['value bytes', bytes(s.valueBytes)],
      ['oldest timestamp', ts(s.oldestTs)],
      ['newest timestamp', ts(s.newestTs)],
    ],
  );
  process.stdout.write('\n');
  printTable(
    ['FAMILY', 'ENTRIES'],
    [...s.families, ...(s.otherFamilies > 0 ? [['(other families)', s.otherFamilies] as const] : [])].map(
      ([f, n]) => [f, n],
    ),
  );
  const notes = [
    ...(s.beyondRange.length > 0
      ? [`${s.beyondRange.length} tablet(s) reach beyond the range and are counted whole`]
      : []),
    ...(s.estimated.length > 0 ? [`${s.estimated.length} file(s) counted by estimated shares`] : []),
    ...(s.withoutStats.length > 0
      ? [`${s.withoutStats.length} file(s) written without statistics: in bytes and entries only`]
      : []),
  ];
  process.stdout.write(`\n${s.exact ? 'exact' : `estimated: ${notes.join('; ')}`}\n`);
}
