/**
 * `excompact admin check`: the manager's consistency check (`GET /v1/check`), as a short summary for
 * people — one line per check with its count and a few examples — or the whole report with --json. Exits
 * 5 when the cluster is inconsistent, so a script can tell that from a check that could not run.
 */
import type { Command } from 'commander';
import type { CheckReport, ProblemList } from '../meta/check-view.js';
import { examples, type JsonFlag } from './admin-common.js';
import { withCluster } from './connect.js';
import { action, EXIT_INCONSISTENT } from './exit.js';
import { intOption } from './flags.js';
import { age, bytes, printJson } from './format.js';

/** Examples shown per problem line. */
const SHOWN = 3;

export function registerCheck(admin: Command): void {
  admin
    .command('check')
    .description('Check the cluster for inconsistencies: dead reservations, queue entries, files.')
    .option('--json', 'print the whole report as JSON (first 100 items of each problem)')
    .option(
      '--timeout <ms>',
      'how long to wait for the manager (it lists the whole object store)',
      intOption('--timeout', 1_000),
      120_000,
    )
    .addHelpText(
      'after',
      `
Checks, most serious first:
  missing files             files a tablet references that are not in the object store (data loss)
  files in two jobs         a file in two running jobs of a tablet (other than the sub-jobs of one
                            split job), or a job's input the tablet does not have
  selections                a system job over files both in and outside a user compaction's
                            selection, or with filters; a user job over other files or filters
                            than its selection; a selected file the tablet does not have
  dead reservations         reservations naming a compactor whose ZooKeeper node is gone
  entries without work      queue entries whose hosted tablet has no work for that queue, or no tablet
  work missing from queue   hosted tablets with work for an existing queue but no entry in it
  orphan files              unreferenced files with no deletion mark, older than the GC grace and the
                            wait for the collector's next sweep
  stale temporaries         leftovers of unfinished writes older than that too (local temporary
                            files, incomplete S3 multipart uploads; "not checkable" where the store
                            cannot list them)
  malformed rows            metadata rows that do not parse
  bad deletion marks        ~del rows the garbage collector skips (a name no store accepts, a file
                            outside tables/, a mangled time): fix or remove them
  referenced marks          ~del rows naming a file a tablet still references
Shown but never a failure: unreferenced files marked for deletion (pending GC), unreferenced files and
temporaries younger than the GC grace (writes in flight), and those past it that wait for the
collector's next sweep (EXC_GC_SWEEP_INTERVAL_MS).

A busy cluster changes while it is read: confirm a problem with a second run before acting on it.

Exit codes: 0 consistent, 5 a problem other than pending GC or young files or temporaries was found,
1 bad usage, 2 cluster unreachable.
${examples(['excompact admin check', 'excompact admin check --json | jq .problems.missingFiles'])}`,
    )
    .action(
      action(async (opts: JsonFlag & { timeout: number }, cmd: Command) => {
        // One attempt: a check is heavy, and an operator reruns it anyway.
        const report = await withCluster(cmd, (c) =>
          c.meta.call<CheckReport>('GET', '/v1/check', undefined, { timeoutMs: opts.timeout, attempts: 1 }),
        );
        if (opts.json) printJson(report);
        else process.stdout.write(formatCheckReport(report));
        if (!report.ok) process.exitCode = EXIT_INCONSISTENT;
      }),
    );
}

/** The human summary of a report. */
export function formatCheckReport(report: CheckReport): string {
  const lists = Object.entries(report.problems);
  const checks = lists.filter(([, l]) => l.severity !== 'info');
  const failing = checks.filter(([, l]) => l.count);
  const lines = [
    `${report.ok ? 'consistent' : `INCONSISTENT: ${failing.length} of ${checks.length} checks found problems`} (checked ${new Date(report.checkedAt).toISOString()})`,
  ];
  const countWidth = Math.max(1, ...lists.map(([, l]) => String(l.count ?? '-').length));
  for (const [name, list] of lists) {
    const count = String(list.count ?? '-').padStart(countWidth);
    let line = `  ${status(list).padEnd(8)} ${count}  ${list.title}`;
    if (list.notCheckable !== undefined) line += `: not checkable (${list.notCheckable})`;
    else if (list.count) {
      const shown = list.items.slice(0, SHOWN).map((item) => describeItem(name, item));
      const more = list.count - shown.length;
      line += `: ${shown.join('; ')}${more > 0 ? ` (+${more} more)` : ''}`;
    }
    lines.push(line);
  }
  const f = report.figures;
  lines.push(
    `figures: ${f.tablets} tablets (${f.hostedTablets} hosted), ${f.reservations} reservations, ` +
      `${f.queueEntries} queue entries, ${f.files} referenced files, ` +
      `${f.objects === null ? 'objects not listed' : `${f.objects} objects (${bytes(f.objectBytes ?? 0)})`}, ` +
      `${f.deletionMarks} deletion marks, ${f.liveCompactors} live compactors, ${f.queues} queues; ` +
      `GC grace ${age(f.graceMs)}`,
    report.note,
  );
  return `${lines.join('\n')}\n`;
}

function status(list: ProblemList): string {
  if (list.count === null) return 'n/a';
  if (list.count === 0) return 'ok';
  return list.severity === 'critical' ? 'CRITICAL' : list.severity === 'error' ? 'PROBLEM' : 'info';
}

/** One example, in a few words; what an unknown (newer) problem's items hold is shown as JSON. */
function describeItem(name: string, item: Record<string, unknown>): string {
  const s = (key: string): string => {
    const value = item[key];
    return typeof value === 'string' || typeof value === 'number' ? String(value) : '-';
  };
  const old = typeof item.ageMs === 'number' ? `${age(item.ageMs)} old` : undefined;
  switch (name) {
    case 'missingFiles':
      return `${s('file')} (tablet ${s('tablet')})`;
    case 'deadCompactorReservations':
      return `${s('ecid')} on ${s('tablet')} (compactor ${s('compactor')})`;
    case 'sharedInputs':
      return `${item.file === undefined ? s('job') : s('file')} on ${s('tablet')}: ${s('problem')}${
        Array.isArray(item.jobs)
          ? ` (${item.jobs.join(', ')})`
          : item.file === undefined
            ? ''
            : ` (${s('job')})`
      }`;
    case 'selectionConflicts':
      return `${item.file === undefined ? s('job') : s('file')} on ${s('tablet')}: ${s('problem')}${
        Array.isArray(item.files) ? ` (${item.files.join(', ')})` : ''
      }`;
    case 'queueEntriesWithoutWork':
      return `${s('entry')} (${s('reason')})`;
    case 'workMissingFromQueue':
      return `${s('tablet')} for queue ${item.queue ? s('queue') : s('queueId')}`;
    case 'orphanFiles':
    case 'unreferencedYoung':
    case 'unreferencedPendingGc':
    case 'awaitingSweep':
      return old ? `${s('file')} (${old})` : s('file');
    case 'staleTemporaries':
    case 'youngTemporaries':
      return `${s('target')} (${[s('id'), old].filter(Boolean).join(', ')})`;
    case 'malformedRows':
      return `${s('row')}: ${s('error')}`;
    case 'badDeletionMarks':
      return `${s('row')}: ${s('problem')}`;
    case 'referencedDeletionMarks':
      return `${s('file')} (tablet ${Array.isArray(item.tablets) ? item.tablets.join(', ') : '-'})`;
    default:
      return JSON.stringify(item);
  }
}
