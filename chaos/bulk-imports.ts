/**
 * The chaos run's bulk imports (the `bulk-import` fault): a file of new rows spread over every tablet of a
 * workload table — puts, and deletes of some of them a moment later — written with `excompact
 * write-rfile` and imported with `excompact import`, run again until it succeeds whatever the other
 * faults do meanwhile. The import's id is made of the file's contents, so every run after the first adds
 * only what the tablets lack; the model learns the entries once the command succeeded, and the workload
 * counts the import in flight until then (a scan behind the table's fence waits for it).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeError } from '../src/errors.js';
import { sleep } from '../src/retry.js';
import type { ChaosCluster } from './cluster.js';
import type { ChaosEntry, TableModel } from './model.js';
import type { ChaosLog } from './report.js';

const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');
/** How long an import is run again before the run calls it stuck. */
const IMPORT_DEADLINE_MS = 10 * 60_000;

/** The entries of import `pick`: rows between the workload's own (`<letter><3 digits>~i<pick>`). */
export function importEntries(pick: number, ts: () => number): ChaosEntry[] {
  const out: ChaosEntry[] = [];
  for (const [l, letter] of LETTERS.entries())
    for (let i = 0; i < 8; i++) {
      const row = `${letter}${String((pick + i * 37 + l) % 1000).padStart(3, '0')}~i${pick}`;
      const put = ts();
      out.push({ row, cf: 'f', cq: 'q', ts: put });
      // One row in four deleted again within the same file.
      if (i % 4 === 3) out.push({ row, cf: 'f', cq: 'q', ts: put + 1, delete: true });
    }
  return out;
}

/** Writes `entries` as an RFile and imports it into `table` until the command succeeds. */
export async function runImport(
  cluster: ChaosCluster,
  log: ChaosLog,
  dir: string,
  table: string,
  model: TableModel,
  pick: number,
  entries: readonly ChaosEntry[],
): Promise<void> {
  const lines = entries.map((e) =>
    JSON.stringify({
      row: e.row,
      cf: e.cf,
      cq: e.cq,
      ts: e.ts,
      ...(e.delete ? { delete: true } : { value: model.valueOf(e.row, e.cf, e.cq, e.ts) }),
    }),
  );
  const ndjson = join(dir, `import-${table}-${pick}.ndjson`);
  const rfile = join(dir, `import-${table}-${pick}.rf`);
  writeFileSync(ndjson, `${lines.join('\n')}\n`);
  await cluster.cli(['write-rfile', rfile, ndjson]);
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      const out = await cluster.cli(['import', table, rfile]);
      log.event('import-done', { table, pick, attempts: attempt + 1, out: out.trim().slice(0, 300) });
      return;
    } catch (err) {
      if (Date.now() - started > IMPORT_DEADLINE_MS) {
        log.event(
          'import-stuck',
          { table, pick, err: describeError(err) },
          `STUCK import ${pick} into ${table}`,
        );
        throw err;
      }
      if (attempt % 5 === 0)
        log.event('import-retry', { table, pick, attempt, err: describeError(err).slice(0, 300) });
      await sleep(Math.min(2_000, 200 * 2 ** Math.min(attempt, 4)));
    }
  }
}
