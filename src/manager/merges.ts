/**
 * Tablet merges, the manager's side (DESIGN.md, "Tablet merges"): `excompact admin table merge`, and the
 * table setting `mergeBelow`.
 *
 * A merge of a row range: the table's tablets overlapping it are gathered on the server hosting the last
 * of them (moves, which cancel nothing; the balancer leaves them alone meanwhile), then that server merges
 * them (tserver/tablet-merges.ts), letting the compactions running on them finish first for up to
 * `waitMs`. The tablets are read again at every step, so a split or a move meanwhile is followed; a merge
 * that cannot be gathered or made within its time says why. Merging a range of one tablet does nothing.
 *
 * By themselves: after each assignment pass, a table with `mergeBelow` merges its first run of neighbours
 * that together hold less than it — one merge at a time, a table whose merge failed left alone a while.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { TabletMeta } from '../meta/tablet.js';
import type { PeerClients } from '../rpc/peers.js';
import { showRow } from '../row-text.js';
import { backoffDelay, sleep } from '../retry.js';
import type { Assigner } from './assignment.js';
import type { Tables } from './tables.js';

export interface MergeParts {
  tables: Tables;
  peers: PeerClients;
  assigner: Assigner;
  log: Logger;
  /** How long the merging server lets running compactions finish before it cancels them. */
  waitMs: number;
}

export interface MergeTableAnswer {
  table: string;
  /** How long gathering the tablets on one server took, and the merge itself there (ms). */
  gatherMs?: number;
  mergeMs?: number;
  /** Tablets merged into `tablet` (0: the range held one tablet, nothing to do). */
  merged: number;
  tablet: string | null;
  /** Compactions cancelled because they were still running when the wait was over. */
  cancelled: number;
  tablets: number;
}

/** How long gathering the tablets on one server may take. */
const GATHER_MS = 30_000;
/** How often a merge whose tablets changed under it (a split, a move) is tried again. */
const ATTEMPTS = 5;

/** Merges table `name`'s tablets overlapping [start, end] (both inclusive; absent: unbounded). */
export async function mergeTable(
  p: MergeParts,
  name: string,
  start: Buffer | undefined,
  end: Buffer | undefined,
): Promise<MergeTableAnswer> {
  const table = await p.tables.getOnline(name);
  let lastError: unknown;
  /** Tablets a failed attempt asked their host to merge (0: none was sent). */
  let asked = 0;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const range = (await p.tables.tablets(table.id)).filter((t) => overlaps(t, start, end));
    if (range.length < 2) {
      const all = await p.tables.tablets(table.id);
      // After an attempt whose answer failed, one tablet left means that attempt merged them.
      if (asked > 0 && range.length === 1)
        p.log.info(
          { table: name, tablet: range[0]!.row, merged: asked },
          'tablets merged (found after a failed answer)',
        );
      return { table: name, merged: asked, tablet: range[0]?.row ?? null, cancelled: 0, tablets: all.length };
    }
    asked = 0;
    const unpin = p.assigner.pin(range.map((t) => t.row));
    try {
      const started = Date.now();
      const gathered = await gather(
        p,
        table.id,
        range.map((t) => t.row),
      );
      const gatherMs = Date.now() - started;
      const host = gathered[gathered.length - 1]!.loc!.server;
      asked = gathered.length;
      const answer = await p.peers
        .get(host)
        .post<{ tablet: string; merged: number; cancelled: number }>(
          '/v1/tablets/merge',
          { tablets: gathered.map((t) => t.row), waitMs: p.waitMs },
          { idempotent: false, attempts: 1, timeoutMs: p.waitMs + 30_000 },
        );
      const mergeMs = Date.now() - started - gatherMs;
      const all = await p.tables.tablets(table.id);
      p.log.info(
        { table: name, tablet: answer.tablet, merged: answer.merged, gatherMs, mergeMs },
        'tablets merged on request',
      );
      return { table: name, ...answer, gatherMs, mergeMs, tablets: all.length };
    } catch (err) {
      lastError = err;
      // A tablet that split or moved under the merge, or a server restarting: read the tablets again.
      if (err instanceof ExcError && err.code === 'CONFLICT' && /pending on only some/.test(err.message))
        throw err;
      await sleep(backoffDelay(attempt, { baseMs: 200, maxMs: 2_000 }));
    } finally {
      unpin();
      void p.assigner.kick();
    }
  }
  const where = `${start ? showRow(start) : '-∞'} to ${end ? showRow(end) : '+∞'}`;
  throw new ExcError('UNAVAILABLE', `could not merge ${name} from ${where}: ${describeError(lastError)}`, {
    details: { table: name },
  });
}

/** Moves `rows` (consecutive tablets) to the host of the last, and resolves them once all are hosted there. */
async function gather(p: MergeParts, tableId: string, rows: string[]): Promise<TabletMeta[]> {
  const deadline = Date.now() + GATHER_MS;
  for (let attempt = 0; ; attempt++) {
    const byRow = new Map((await p.tables.tablets(tableId)).map((t) => [t.row, t]));
    const tablets = rows.map((r) => byRow.get(r));
    if (tablets.some((t) => t === undefined))
      throw new ExcError('CONFLICT', 'a tablet of the range split or merged meanwhile', {
        details: { tablet: rows[0] },
      });
    const present = tablets as TabletMeta[];
    const host = present[present.length - 1]!.loc?.server;
    if (host && present.every((t) => t.loc?.server === host && !t.future)) return present;
    if (Date.now() > deadline)
      throw new ExcError(
        'UNAVAILABLE',
        `the tablets could not be gathered on one server within ${GATHER_MS / 1000} s`,
      );
    if (host)
      for (const t of present)
        if (t.loc && t.loc.server !== host && !t.future) await p.assigner.moveTo(t, host);
    await sleep(backoffDelay(attempt, { baseMs: 50, maxMs: 500 }));
  }
}

/** Whether tablet (prev, end] overlaps [start, end]. */
export function overlaps(t: TabletMeta, start?: Buffer, end?: Buffer): boolean {
  if (start && t.endRow && Buffer.compare(t.endRow, start) < 0) return false;
  if (end && t.prevEndRow && Buffer.compare(t.prevEndRow, end) >= 0) return false;
  return true;
}

/** After a failed automatic merge, its table is left alone this long. */
const AUTO_RETRY_MS = 30_000;

/** Merges neighbours below their table's `mergeBelow`, one merge at a time (see the module comment). */
export class AutoMerger {
  private running: Promise<void> | undefined;
  private readonly failedAt = new Map<string, number>();
  readonly stats = { merges: 0, failed: 0 };

  constructor(private readonly parts: MergeParts) {}

  /** Looks at the tablets an assignment pass read; starts a merge if one is due and none runs. */
  consider(tablets: readonly TabletMeta[]): void {
    if (this.running) return;
    this.running = this.mergeOne(tablets)
      .catch((err: unknown) => this.parts.log.warn({ err: describeError(err) }, 'automatic merge failed'))
      .finally(() => (this.running = undefined));
  }

  async stop(): Promise<void> {
    await this.running;
  }

  private async mergeOne(tablets: readonly TabletMeta[]): Promise<void> {
    const tables = await this.parts.tables.list();
    for (const table of tables) {
      const below = table.config.mergeBelow;
      if (below === undefined || table.state !== 'online') continue;
      if (Date.now() - (this.failedAt.get(table.id) ?? 0) < AUTO_RETRY_MS) continue;
      const mine = tablets.filter((t) => t.tableId === table.id);
      const run = firstRunBelow(mine, below);
      if (!run) continue;
      try {
        await mergeTable(this.parts, table.name, run.start, run.end);
        this.stats.merges++;
      } catch (err) {
        this.stats.failed++;
        this.failedAt.set(table.id, Date.now());
        throw err;
      }
      return;
    }
  }
}

/**
 * The first run of at least two neighbouring tablets (in row order) holding less than `below` bytes
 * together, as the rows to merge: from the first's first row to the last's end row.
 */
export function firstRunBelow(
  tablets: readonly TabletMeta[],
  below: number,
): { start: Buffer | undefined; end: Buffer | undefined } | undefined {
  const bytes = (t: TabletMeta) => [...t.files.values()].reduce((n, f) => n + f.size, 0);
  for (let i = 0; i + 1 < tablets.length; i++) {
    let total = bytes(tablets[i]!);
    let j = i;
    while (j + 1 < tablets.length && total + bytes(tablets[j + 1]!) < below) total += bytes(tablets[++j]!);
    if (j > i) {
      const first = tablets[i]!;
      const last = tablets[j]!;
      // The first row of the first tablet: just after its previous end row.
      const start =
        first.prevEndRow === null ? undefined : Buffer.concat([first.prevEndRow, Buffer.from([0])]);
      return { start, end: last.endRow ?? undefined };
    }
  }
  return undefined;
}
