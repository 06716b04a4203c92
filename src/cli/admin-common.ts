/**
 * What the `excompact admin` command modules share: the --json flag, the examples block of --help, and
 * the tables of running compactions, parked jobs and compactors (shown by `queue info` and the
 * compactions and compactors listings).
 */
import {
  shortCompactorName,
  type CompactorView,
  type ParkedCompaction,
  type RunningCompaction,
} from '../meta/views.js';
import { age, bytes, formatTable } from './format.js';

export interface JsonFlag {
  json?: boolean;
}

export const examples = (lines: string[]): string =>
  `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}\n`;

/** A repeatable option's values. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * Running compactions. Compactors by their short names (`queue@host#seq`): `hosts` maps a compactor's
 * path to its host, when known.
 */
export function runningTable(running: RunningCompaction[], hosts = new Map<string, string | null>()): string {
  return formatTable(
    ['ECID', 'TABLE', 'TABLET', 'QUEUE', 'COMPACTOR', 'AGE', 'READ', 'WRITTEN', 'PROGRESS'],
    running.map((r) => [
      r.split ? `${r.ecid} (${r.split.index + 1}/${r.split.of})` : r.ecid,
      r.table,
      r.tablet,
      r.queue ?? r.queueId,
      shortCompactorName(r.compactor, r.queue, hosts.get(r.compactor)),
      age(r.ageMs),
      r.progress ? r.progress.entriesRead : null,
      r.progress ? r.progress.entriesWritten : null,
      r.progress && r.inputBytes > 0
        ? `${Math.min(100, Math.round((r.progress.bytesRead / r.inputBytes) * 100))}% of ${bytes(r.inputBytes)}`
        : null,
    ]),
  );
}

export function printRunning(running: RunningCompaction[], hosts?: Map<string, string | null>): void {
  process.stdout.write(runningTable(running, hosts));
}

export function parkedTable(parked: ParkedCompaction[]): string {
  return formatTable(
    ['ID', 'TABLE', 'TABLET', 'QUEUE', 'ATTEMPTS', 'LAST ERROR'],
    parked.map((p) => [p.id, p.table, p.tablet, p.queue ?? p.queueId, p.attempts, p.lastError.slice(0, 100)]),
  );
}

export function printParked(parked: ParkedCompaction[]): void {
  process.stdout.write(parkedTable(parked));
}

/** Live compactors by their short names; `--json` keeps the full node paths. */
export function printCompactors(compactors: CompactorView[]): void {
  process.stdout.write(
    formatTable(
      ['COMPACTOR', 'QUEUE', 'HOST', 'PID', 'UP', 'STATUS'],
      compactors.map((c) => [
        shortCompactorName(c.path, c.queue, c.host),
        c.queue,
        c.host,
        c.pid,
        c.started ? age(Date.now() - c.started) : null,
        c.status,
      ]),
    ),
  );
}
