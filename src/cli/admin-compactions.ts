/**
 * `excompact admin compactors …` and `excompact admin compactions …`: live compactors, running and parked
 * jobs, and how compactions ended.
 */
import type { Command } from 'commander';
import { ExcError, describeError } from '../errors.js';
import type { HistoryAnswer } from '../meta/outcomes.js';
import { parseDuration } from '../meta/table-config.js';
import {
  shortCompactorName,
  type CancelAnswer,
  type CompactorView,
  type ParkedCompaction,
  type RunningCompaction,
} from '../meta/views.js';
import { examples, parkedTable, printCompactors, runningTable, type JsonFlag } from './admin-common.js';
import { withCluster, type Cluster } from './connect.js';
import { sleep } from '../retry.js';
import { action } from './exit.js';
import { intOption, nonEmpty } from './flags.js';
import { age, bytes, printJson, printTable } from './format.js';

interface ListFlags extends JsonFlag {
  queue?: string;
  table?: string;
  state?: string;
  watch?: string | true;
}

/** What `compactions list` prints, once. */
async function listing(c: Cluster, opts: ListFlags): Promise<string> {
  const query = new URLSearchParams(
    Object.entries({ queue: opts.queue, table: opts.table, state: opts.state }).filter(
      (e): e is [string, string] => !!e[1],
    ),
  );
  const [result, { compactors }] = await Promise.all([
    c.meta.call<{ running: RunningCompaction[]; parked: ParkedCompaction[] }>(
      'GET',
      `/v1/compactions${query.size ? `?${query.toString()}` : ''}`,
    ),
    opts.json ? { compactors: [] } : c.meta.call<{ compactors: CompactorView[] }>('GET', '/v1/compactors'),
  ]);
  if (opts.json) return `${JSON.stringify(result, null, 2)}\n`;
  const hosts = new Map(compactors.map((x) => [x.path, x.host]));
  let text = '';
  if (opts.state !== 'parked')
    text += `running (${result.running.length}):\n${runningTable(result.running, hosts)}`;
  if (opts.state !== 'running')
    text += `${opts.state ? '' : '\n'}parked (${result.parked.length}):\n${parkedTable(result.parked)}`;
  return text;
}

/**
 * Prints `frame()` every `everyMs` until Ctrl-C (then exits 0). On a terminal each frame replaces the last
 * (cursor home, clear); otherwise frames follow each other under a time stamp, for a log.
 */
async function watch(everyMs: number, frame: () => Promise<string>): Promise<void> {
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const tty = process.stdout.isTTY;
  try {
    while (!stop.signal.aborted) {
      const stamp = `── ${new Date().toISOString().slice(11, 19)} ─ every ${everyMs} ms${tty ? ', Ctrl-C stops' : ''}\n`;
      const text = await frame().catch((err: unknown) => `! ${describeError(err)}\n`);
      process.stdout.write(tty ? `\x1b[H\x1b[2J${stamp}${text}` : `${stamp}${text}\n`);
      await sleep(everyMs, stop.signal).catch(() => undefined);
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}

export function registerCompactors(admin: Command): void {
  admin
    .command('compactors')
    .description('Live compactors.')
    .command('list')
    .description('List live compactors (from their ZooKeeper nodes).')
    .option('--queue <name>', 'only this queue', nonEmpty('--queue'))
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples(['excompact admin compactors list', 'excompact admin compactors list --queue small --json']),
    )
    .action(
      action(async (opts: JsonFlag & { queue?: string }, cmd: Command) => {
        const { compactors } = await withCluster(cmd, (c) =>
          c.meta.call<{ compactors: CompactorView[] }>(
            'GET',
            `/v1/compactors${opts.queue ? `?queue=${encodeURIComponent(opts.queue)}` : ''}`,
          ),
        );
        if (opts.json) return printJson(compactors);
        printCompactors(compactors);
      }),
    );
}

export function registerCompactions(admin: Command): void {
  const compactions = admin.command('compactions').description('Running and parked compactions.');

  compactions
    .command('list')
    .description('List running compactions (reservations) and parked jobs.')
    .option('--queue <name>', 'only this queue', nonEmpty('--queue'))
    .option('--table <name>', 'only this table')
    .option('--state <state>', 'running or parked')
    .option('--watch [ms]', 'list again every ms (default 2000) until Ctrl-C; a terminal redraws in place')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions list',
        'excompact admin compactions list --state parked --table events',
        'excompact admin compactions list --watch',
      ]),
    )
    .action(
      action(async (opts: ListFlags, cmd: Command) => {
        if (opts.state && opts.state !== 'running' && opts.state !== 'parked') {
          throw new ExcError('BAD_REQUEST', `--state must be running or parked, not ${opts.state}`);
        }
        const everyMs = opts.watch === undefined ? 0 : opts.watch === true ? 2_000 : Number(opts.watch);
        if (opts.watch !== undefined && !(Number.isInteger(everyMs) && everyMs >= 100)) {
          throw new ExcError(
            'BAD_REQUEST',
            `--watch: expected milliseconds (100 or more), not ${String(opts.watch)}`,
          );
        }
        await withCluster(cmd, async (c) => {
          if (everyMs === 0) return void process.stdout.write(await listing(c, opts));
          await watch(everyMs, () => listing(c, opts));
        });
      }),
    );

  compactions
    .command('history')
    .description(
      'How compactions ended: committed, failed or cancelled and why, with durations, bytes and errors (newest first).',
    )
    .option('--since <duration>', 'only those reserved this long ago or later (e.g. 30m, 12h, 7d)', '1h')
    .option('--table <name>', 'only this table')
    .option('--queue <name>', 'only this queue', nonEmpty('--queue'))
    .option('--outcome <outcome>', 'committed or cancelled')
    .option('--limit <n>', 'at most this many (the counts cover all)', intOption('--limit', 1, 10_000), 20)
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions history',
        'excompact admin compactions history --since 24h --outcome cancelled --table events',
      ]),
    )
    .action(
      action(
        async (
          opts: JsonFlag & { since: string; table?: string; queue?: string; outcome?: string; limit: number },
          cmd: Command,
        ) => {
          if (opts.outcome !== undefined && opts.outcome !== 'committed' && opts.outcome !== 'cancelled')
            throw new ExcError(
              'BAD_REQUEST',
              `--outcome: expected committed or cancelled, not ${opts.outcome}`,
            );
          const since = Date.now() - parseDuration(opts.since);
          const found = await withCluster(cmd, async (c) => {
            const query = new URLSearchParams({ since: String(since), limit: String(opts.limit) });
            if (opts.table) query.set('table', opts.table);
            if (opts.outcome) query.set('outcome', opts.outcome);
            if (opts.queue) {
              const { queue } = await c.meta.call<{ queue: { id: string } }>(
                'GET',
                `/v1/queues/${encodeURIComponent(opts.queue)}`,
              );
              query.set('queue', queue.id);
            }
            const [history, { queues }] = await Promise.all([
              c.meta.call<HistoryAnswer>('GET', `/v1/compactions/history?${query.toString()}`),
              opts.json
                ? { queues: [] }
                : c.meta.call<{ queues: { id: string; name: string }[] }>('GET', '/v1/queues'),
            ]);
            return { history, queueNames: new Map(queues.map((q) => [q.id, q.name])) };
          });
          const { history: answer, queueNames } = found;
          if (opts.json) return printJson(answer);
          const { committed, cancelled } = answer.counts;
          const reasons = Object.entries(cancelled)
            .map(([reason, n]) => `${n} ${reason}`)
            .join(', ');
          process.stdout.write(
            `since ${opts.since} ago: ${committed} committed, ${Object.values(cancelled).reduce((a, b) => a + b, 0)} cancelled${reasons ? ` (${reasons})` : ''}\n\n`,
          );
          const now = Date.now();
          printTable(
            [
              'ECID',
              'TABLE',
              'TABLET',
              'KIND',
              'OUTCOME',
              'REASON',
              'ENDED',
              'RAN',
              'BYTES',
              'COMPACTOR',
              'ERROR',
            ],
            answer.outcomes.map((o) => [
              o.ecid,
              o.table,
              o.tablet,
              o.kind,
              o.outcome,
              o.reason ?? '',
              `${age(now - o.at)} ago`,
              age(o.at - o.reservedAt),
              o.inputBytes === undefined ? '' : `${bytes(o.inputBytes)}->${bytes(o.outputBytes ?? 0)}`,
              shortCompactorName(o.compactor, queueNames.get(o.queueId)),
              o.error?.replace(/\s+/g, ' ').slice(0, 60) ?? '',
            ]),
          );
        },
      ),
    );

  compactions
    .command('cancel')
    .description(
      'Cancel a running compaction (its tablet requeues the work), a user compaction (on every tablet ' +
        'where it has not committed), or a parked user job (on its tablet).',
    )
    .argument(
      '<id>',
      'an ECID (`compactions list`), a user compaction id, or a parked job id',
      nonEmpty('the id'),
    )
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions cancel 01HZY3Q6W4M3V6Q7B2G8N5T0RZ',
        'excompact admin compactions cancel 3f9c2a1b0d4e5f60718293a4',
      ]),
    )
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        const result = await withCluster(cmd, (c) =>
          c.meta.call<CancelAnswer>('POST', `/v1/compactions/${encodeURIComponent(id)}/cancel`),
        );
        process.stdout.write(`${await cancelMessage(id, result)}\n`);
      }),
    );

  compactions
    .command('status')
    .description('Where a user compaction (`admin table compact`) stands on each tablet, and how it ended.')
    .argument('<id>', 'the id `admin table compact` printed', nonEmpty('the id'))
    .option('--wait', 'show progress and return when every tablet is done (re-attaches to any compaction)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions status 01HZY3Q6W4M3V6Q7B2G8N5T0RZ',
        'excompact admin compactions status 01HZY3Q6W4M3V6Q7B2G8N5T0RZ --wait',
      ]),
    )
    .action(
      action(async (id: string, opts: JsonFlag & { wait?: boolean }, cmd: Command) => {
        const { followUserCompaction } = await import('./admin-follow.js');
        await withCluster(cmd, (c) => followUserCompaction(c, id, opts));
      }),
    );

  compactions
    .command('release')
    .description('Release parked jobs so they are tried again.')
    .argument(
      '[id]',
      'a parked job (ID column of `compactions list --state parked`, or its last ECID)',
      nonEmpty('the id'),
    )
    .option('--table <name>', 'release every parked job of a table', nonEmpty('--table'))
    .addHelpText(
      'after',
      examples([
        'excompact admin compactions release 3f9c2a1b0d4e5f60718293a4',
        'excompact admin compactions release --table events',
      ]),
    )
    .action(
      action(async (id: string | undefined, opts: { table?: string }, cmd: Command) => {
        if (!id && !opts.table) throw new ExcError('BAD_REQUEST', 'give a parked job id or --table');
        if (id && opts.table) throw new ExcError('BAD_REQUEST', 'give a parked job id or --table, not both');
        const result = await withCluster(cmd, (c) =>
          c.meta.call<{ released: { tablet: string; id: string }[] }>(
            'POST',
            '/v1/compactions/release',
            id ? { id } : { table: opts.table },
          ),
        );
        process.stdout.write(
          `released ${result.released.length} parked job${result.released.length === 1 ? '' : 's'}\n`,
        );
      }),
    );
}

/** What a cancel did, in words. An ended compaction is an answer, not an error (exit 0). */
async function cancelMessage(id: string, result: CancelAnswer): Promise<string> {
  if ('userCompaction' in result) {
    const { tablets, table } = result.userCompaction;
    if (tablets.length > 0)
      return `cancelled user compaction ${id} of ${table} on ${tablets.length} tablet${tablets.length === 1 ? '' : 's'}`;
    return result.cancelled
      ? `user compaction ${id} was cancelled already`
      : `user compaction ${id} had already finished`;
  }
  if ('parked' in result) {
    const { tablet, userCompactionIds } = result.parked;
    return `cancelled parked job ${id} on tablet ${tablet} (user compaction ${userCompactionIds.join(', ')})`;
  }
  if (result.cancelled) return `cancelled ${id}`;
  const { howEnded } = await import('./admin-follow.js');
  return `${id} had already ended${'ended' in result ? `: ${howEnded(result.ended)}` : ''}`;
}
