/**
 * What the `excompact admin` command modules share: the --json flag, the examples block of --help, and
 * the tables of running compactions, parked jobs and compactors (shown by `queue info` and the
 * compactions and compactors listings).
 */
import type { CompactorView, ParkedCompaction, RunningCompaction } from '../meta/views.js';
import { age, printTable } from './format.js';

export interface JsonFlag {
  json?: boolean;
}

export const examples = (lines: string[]): string =>
  `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}\n`;

/** A repeatable option's values. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function printRunning(running: RunningCompaction[]): void {
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

export function printParked(parked: ParkedCompaction[]): void {
  printTable(
    ['ID', 'TABLE', 'TABLET', 'QUEUE', 'ATTEMPTS', 'LAST ERROR'],
    parked.map((p) => [p.id, p.table, p.tablet, p.queue ?? p.queueId, p.attempts, p.lastError.slice(0, 100)]),
  );
}

export function printCompactors(compactors: CompactorView[]): void {
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
