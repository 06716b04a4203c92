/**
 * Following a user compaction by its id (`admin compactions status <id> [--wait]`): where it stands on
 * each tablet, and, with `--wait`, progress until every tablet is done — from any shell, at any time
 * after `admin table compact` printed the id (while the manager keeps its record).
 */
import type { Outcome } from '../meta/outcomes.js';
import { showSelector } from '../meta/selectors.js';
import { ENDED_STATES, type UserCompactionStatus } from '../meta/user-compactions.js';
import { sleep } from '../retry.js';
import type { Cluster } from './connect.js';
import { age, bytes, printJson, printTable, progressBar } from './format.js';

/** Polls the status until done (with `wait`), then prints it. */
export async function followUserCompaction(
  c: Cluster,
  id: string,
  opts: { wait?: boolean; json?: boolean },
): Promise<UserCompactionStatus> {
  const tty = process.stderr.isTTY;
  for (;;) {
    const status = await c.meta.call<UserCompactionStatus>(
      'GET',
      `/v1/user-compactions/${encodeURIComponent(id)}`,
    );
    if (!opts.wait || status.done) {
      if (opts.wait && tty) process.stderr.write('\n');
      if (opts.json) printJson(status);
      else printStatus(status);
      return status;
    }
    if (tty) process.stderr.write(`\r${progressBar(fractionDone(status))} ${summary(status)}\x1b[K`);
    await sleep(500);
  }
}

/** Tablets done, plus the bytes read of the running ones against their inputs. */
function fractionDone(s: UserCompactionStatus): number {
  if (s.tablets.length === 0) return 1;
  let done = 0;
  for (const t of s.tablets) {
    if (ENDED_STATES.has(t.state)) done += 1;
    else if (t.state === 'running' && t.inputBytes) done += Math.min(1, (t.bytesRead ?? 0) / t.inputBytes);
  }
  return done / s.tablets.length;
}

function summary(s: UserCompactionStatus): string {
  const done = s.tablets.filter((t) => ENDED_STATES.has(t.state)).length;
  const cancelled = s.cancelled ? `, cancelled on ${s.cancelled}` : '';
  return `user compaction ${s.id} of ${s.table}: ${done}/${s.tablets.length} tablets done${cancelled}`;
}

function printStatus(s: UserCompactionStatus): void {
  const now = Date.now();
  const filters = s.filters.map(
    (f) => `${f.name}${f.options === undefined ? '' : JSON.stringify(f.options)}`,
  );
  process.stdout.write(
    `${summary(s)}${s.done ? ' (finished)' : ''}\n` +
      `${s.requestedAt ? `requested ${age(now - s.requestedAt)} ago` : 'requested'}, filters: ${filters.join(' ') || 'none'}` +
      `${s.queue ? `, queue: ${s.queue}` : ''}` +
      `${s.select ? `, select: ${s.select.map(showSelector).join(' ')}` : ''}\n\n`,
  );
  printTable(
    ['TABLET', 'STATE', 'FILES', 'ECID', 'PROGRESS', 'RAN', 'OUTPUT', 'FAILED', 'NOTE'],
    s.tablets.map((t) => [
      t.tablet,
      t.state === 'done' && !t.ecid && !t.split ? 'done (no files)' : t.state,
      // The files selected (`--json` names them).
      t.files?.length ?? null,
      // A split job is no one reservation: its split's id (`--json` lists its sub-jobs' ecids).
      t.ecid ??
        (t.split
          ? `split ${t.split.id}${t.split.ecids.length > 0 ? ` (${t.split.ecids.length} sub-jobs)` : ''}`
          : undefined),
      t.state === 'running' ? `${bytes(t.bytesRead ?? 0)}/${bytes(t.inputBytes ?? 0)}` : null,
      t.ranMs === undefined ? null : age(t.ranMs),
      t.outputBytes === undefined ? null : bytes(t.outputBytes),
      t.failedAttempts || null,
      [
        t.coalescedWith ? `with ${t.coalescedWith.join(', ')}` : '',
        t.lastError ? `last error: ${t.lastError.slice(0, 80)}` : '',
      ]
        .filter(Boolean)
        .join('; '),
    ]),
  );
}

/** How an ended compaction ended, in words: committed, failed (with its error) or cancelled (and why). */
export function howEnded(o: Pick<Outcome, 'outcome' | 'reason' | 'error' | 'at'>): string {
  const when = `${age(Date.now() - o.at)} ago`;
  if (o.outcome === 'committed') return `committed ${when}`;
  if (o.reason === 'failed' || o.reason === 'stalled')
    return `failed ${when}${o.error ? `: ${o.error.slice(0, 200)}` : ` (${o.reason})`}`;
  return `cancelled ${when} (${o.reason ?? 'unknown'})`;
}
