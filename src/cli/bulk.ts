/**
 * `excompact write-rfile` and `excompact import`: data loaded as sorted files (bulk import). The work is in
 * bulk-run.ts, loaded when a command runs.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { COMPRESSIONS } from '../compressions.js';
import type { ImportFlags, WriteRFileFlags } from './bulk-run.js';
import { action } from './exit.js';
import { idOption, intOption, nonEmpty } from './flags.js';

function compressionOption(value: string): string {
  if (!(COMPRESSIONS as readonly string[]).includes(value))
    throw new InvalidArgumentError(`--compression must be one of ${COMPRESSIONS.join(', ')}`);
  return value;
}

export function registerBulk(program: Command): void {
  program
    .command('write-rfile')
    .description('Write NDJSON entries (from a file or stdin) as a sorted RFile, for `excompact import`.')
    .argument('<output>', 'the RFile to write (replaced if it exists)', nonEmpty('the output file'))
    .argument('[input]', 'NDJSON file (default: stdin)')
    .option(
      '--compression <codec>',
      `block codec: ${COMPRESSIONS.join(', ')} (default zstd)`,
      compressionOption,
    )
    .option('--block-size <bytes>', 'data block size (default 65536)', intOption('--block-size', 1024))
    .addHelpText(
      'after',
      `
The lines are those of \`excompact ingest\`; they need not be sorted (the file is sorted in memory).
An entry without "ts" takes the time of writing; of entries with the same key, the last one wins.

Examples:
  excompact write-rfile events-1.rf events-1.ndjson
  excompact write-rfile events-1.rf events-1.ndjson && excompact import events events-1.rf
`,
    )
    .action(
      action(async (output: string, input: string | undefined, flags: WriteRFileFlags) => {
        const { runWriteRFile } = await import('./bulk-run.js');
        await runWriteRFile(output, input, flags);
      }),
    );

  program
    .command('import')
    .description('Add sorted RFiles to a table (bulk import): each tablet takes the rows that are its own.')
    .argument('<table>', 'table name', nonEmpty('the table name'))
    .argument('<paths...>', 'RFiles, or directories of them (their *.rf files)')
    .option('--id <id>', "name of this import (default: one made of the files' contents)", idOption('--id'))
    .option('--stamp', "give every entry the import's time (each cell keeps its newest entry)")
    .option(
      '--wait-ms <ms>',
      'how long a tablet may hold the import back for its compactions that drop deletes (default 600000)',
      intOption('--wait-ms', 0),
    )
    .addHelpText(
      'after',
      `
Every file is read whole and checked first (checksums, codec, order, footer and index): a bad file is
named with what is wrong, and nothing is imported. The files are then uploaded to the object store and
added to the tablets whose rows they hold, one atomic change per tablet. An import is applied once under
its id: run again (with the same files, or the same --id) after a failure, it adds only what is missing.
Imported entries keep their timestamps unless --stamp is given.

Examples:
  excompact import events events-1.rf events-2.rf
  excompact import events ./export/ --id load-2026-12-02
`,
    )
    .action(
      action(async (table: string, paths: string[], flags: ImportFlags, cmd: Command) => {
        const { runImport } = await import('./bulk-run.js');
        await runImport(table, paths, flags, cmd);
      }),
    );
}
