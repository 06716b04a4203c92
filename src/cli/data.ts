/**
 * `excompact ingest <table>` and `excompact scan <table>`: data in and out as NDJSON.
 *
 * A line is an entry: {"row": "r1", "cf": "f", "cq": "q", "ts": 1700000000000, "value": "v", "delete": false}
 * with strings in UTF-8, or in base64 when the line says "encoding": "base64". Only `row` is required.
 *
 * Ingest validates the whole input before writing anything (stdin is spooled to a temporary file first),
 * so a bad line is reported with its number and nothing is written.
 */
import type { Command } from 'commander';
import type { IngestFlags } from './data-run.js';
import { action } from './exit.js';
import { idOption, intOption, nonEmpty } from './flags.js';

export function registerData(program: Command): void {
  program
    .command('ingest')
    .description('Write NDJSON entries (from a file or stdin) into a table.')
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .argument('[file]', 'NDJSON file (default: stdin)')
    .option(
      '--batch-id <id>',
      'name of this ingest (default: a new one); the same input under the same id is written once',
      idOption('--batch-id'),
    )
    .option(
      '--skip-batches <n>',
      'finishing a failed ingest: its first n batches were acknowledged (it printed n); not sent again',
      intOption('--skip-batches', 0),
    )
    .addHelpText(
      'after',
      `
Each line: {"row":"r1","cf":"f","cq":"q","ts":1700000000000,"value":"v","delete":false}
(only "row" is required; add "encoding":"base64" for binary). The input is validated before anything is
written: a bad line is reported with its number and nothing is ingested.

An ingest is written in batches that each tablet applies once by name (<batch id>.<n>). If it fails part
way, it says how many entries were acknowledged and prints the command that writes the rest: the same
input with the same --batch-id and --skip-batches (within 15 minutes), which writes every batch not
already applied.

Examples:
  excompact ingest events data.ndjson
  printf '{"row":"a","value":"1"}\\n{"row":"b","delete":true}\\n' | excompact ingest events
  excompact ingest events data.ndjson --batch-id load-2026-11-24
`,
    )
    .action(
      action(async (table: string, file: string | undefined, flags: IngestFlags, cmd: Command) => {
        const { runIngest } = await import('./data-run.js');
        await runIngest(table, file, flags, cmd);
      }),
    );

  program
    .command('scan')
    .description('Read a table (or a row range) as NDJSON, with deletes and versions applied.')
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .option('--start <row>', 'first row (inclusive; text, or 0x and its bytes in hex)')
    .option('--end <row>', 'last row (inclusive; text, or 0x and its bytes in hex)')
    .option('--limit <n>', 'at most this many entries', intOption('--limit', 1))
    .addHelpText(
      'after',
      '\nExamples:\n  excompact scan events\n  excompact scan events --start a --end m --limit 100\n' +
        '  excompact scan blobs --start 0x00ff --end 0x01\n',
    )
    .action(
      action(async (table: string, opts: { start?: string; end?: string; limit?: number }, cmd: Command) => {
        const { runScan } = await import('./data-run.js');
        await runScan(table, opts, cmd);
      }),
    );
}
