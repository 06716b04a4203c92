/**
 * Tablet merges on the tablet server: the I/O around tablet-merge-rules.ts. The manager gathers the
 * tablets of a row range on one server (moves: nothing is cancelled) and asks it to merge them.
 *
 * 1. The tablets close: they plan no job (their queue entries go) and make no reservation, so what runs
 *    on them can finish. A hold on one of them settles when its sibling's compaction ends.
 * 2. They wait, up to `waitMs`, for no reservation and no hold to be left.
 * 3. What is still there then is let go: reservations cancelled (reason `merge`: not a failed attempt),
 *    split jobs and kept checkpoints dropped, holds let go (tablet-merge-rules.ts, letGoForMerge).
 * 4. In every tablet's mutex (in row order), the rules decide from the tablets as they are and the change
 *    is applied through the last tablet's host path like any other; the others stop being served here.
 * A merge that cannot be made (a user compaction pending on part of the range, a tablet not hosted here)
 * changes nothing and says why; the tablets open again.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { fileProfile, type FileProfile, type ObjectStore } from '../storage/index.js';
import { sleep } from '../retry.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import type { Reservations } from './reservations.js';
import { decideTabletMerge, letGoForMerge, mergeBlocker } from './tablet-merge-rules.js';

export interface TabletMergesDeps {
  hosting: Hosting;
  reservations: Reservations;
  store: ObjectStore;
  log: Logger;
}

export interface MergeAnswer {
  /** The merged tablet's row (the last tablet's). */
  tablet: string;
  merged: number;
  /** Reservations cancelled because they were still running when the wait was over. */
  cancelled: number;
  waitedMs: number;
}

export class TabletMerges {
  readonly stats = { merges: 0, cancelled: 0 };
  private readonly running = new Set<string>();

  constructor(private readonly deps: TabletMergesDeps) {}

  /** Merges the hosted tablets `rows` (consecutive, in row order), waiting up to `waitMs` first. */
  async merge(rows: readonly string[], waitMs: number): Promise<MergeAnswer> {
    const { hosting, log } = this.deps;
    if (rows.some((r) => this.running.has(r)))
      throw new ExcError('CONFLICT', 'a merge of these tablets is under way', {
        details: { tablet: rows[0] },
      });
    const tablets = await Promise.all(rows.map((r) => hosting.get(r)));
    const shape = mergeBlocker(
      tablets.map((t) => ({
        ...t.meta,
        reservations: new Map(),
        splits: new Map(),
        resumes: new Map(),
        holds: new Map(),
      })),
    );
    if (shape) throw new ExcError('CONFLICT', `cannot merge ${rows[0]} to ${rows.at(-1)}: ${shape}`);
    for (const r of rows) this.running.add(r);
    const started = Date.now();
    try {
      // 1. Closed: no job planned (their queue entries go), no reservation made.
      for (const t of tablets) t.closing = true;
      for (const t of tablets) await hosting.replan(t);
      // 2. The running compactions end, and the holds on them settle.
      const busy = () => tablets.some((t) => t.meta.reservations.size > 0 || t.meta.holds.size > 0);
      while (busy() && Date.now() - started < waitMs) await sleep(50);
      // 3. What is left is let go.
      let cancelled = 0;
      for (const t of tablets) {
        for (const ecid of [...t.meta.reservations.keys()])
          if (await this.deps.reservations.cancel(t.row, ecid, 'merge')) cancelled++;
        await t.mutex.run(async () => {
          const change = letGoForMerge(t.meta, Date.now());
          if (change && t.state === 'hosted') await hosting.change(t, { ...change, replan: true });
        });
      }
      // 4. In every tablet's mutex, in row order.
      const profiles = await this.profiles(tablets);
      const firstPrev = tablets[0]!.meta.prevEndRow;
      const merged = await inMutexes(tablets, async () => {
        for (const t of tablets) {
          if (t.stale) await hosting.resync(t);
          if (t.state !== 'hosted')
            throw new ExcError('NOT_SERVING', `tablet ${t.row} is not hosted here`, {
              details: { tablet: t.row },
            });
        }
        const blocker = mergeBlocker(tablets.map((t) => t.meta));
        if (blocker) throw new ExcError('CONFLICT', `cannot merge ${rows[0]} to ${rows.at(-1)}: ${blocker}`);
        const last = tablets[tablets.length - 1]!;
        const decision = decideTabletMerge(
          tablets.map((t) => t.meta),
          profiles,
          Date.now(),
        );
        let applied: boolean;
        try {
          applied = await hosting.change(last, { ...decision.change, replan: true });
        } catch (err) {
          if (!(err instanceof ExcError && err.code === 'OUTCOME_UNKNOWN') || last.stale) throw err;
          // Read back: merged if the last tablet's rows start where the first's did.
          applied = sameEndRow(last.meta.prevEndRow, firstPrev);
          if (!applied) throw err;
        }
        if (!applied) {
          // A user compaction asked of one of them meanwhile, say: their copies read it for the next try.
          for (const t of tablets) await hosting.rereadRequests(t);
          throw new ExcError('CONFLICT', `tablets ${rows[0]} to ${rows.at(-1)} changed; try again`);
        }
        for (const t of tablets.slice(0, -1)) hosting.drop(t, 'merged');
        return last;
      });
      merged.closing = false;
      // Planned now that it is open again. The merge is done whatever happens to this: a replan that
      // fails is tried again by the tablet's next change or the reconciler.
      await hosting.replan(merged).catch((err: unknown) => {
        merged.replanNeeded = true;
        log.warn({ tablet: merged.row, err: describeError(err) }, 'could not plan a merged tablet yet');
      });
      this.stats.merges++;
      this.stats.cancelled += cancelled;
      const answer = {
        tablet: merged.row,
        merged: tablets.length,
        cancelled,
        waitedMs: Date.now() - started,
      };
      log.info({ ...answer, from: rows[0] }, 'tablets merged');
      return answer;
    } catch (err) {
      log.warn({ tablets: rows.length, from: rows[0], err: describeError(err) }, 'tablet merge failed');
      throw err;
    } finally {
      for (const r of rows) this.running.delete(r);
      for (const t of tablets) {
        if (!t.closing) continue;
        t.closing = false;
        if (t.state === 'hosted') void hosting.replan(t).catch(() => undefined);
      }
    }
  }

  private async profiles(tablets: readonly HostedTablet[]): Promise<Map<string, FileProfile>> {
    const out = new Map<string, FileProfile>();
    const names = new Set(tablets.flatMap((t) => [...t.meta.files.keys()]));
    await Promise.all(
      [...names].map(async (name) => {
        // Without one the file keeps its fence: reads stay right, only a little slower.
        const p = await fileProfile(this.deps.store, name).catch(() => undefined);
        if (p) out.set(name, p);
      }),
    );
    return out;
  }
}

/** Runs `fn` holding every tablet's mutex, taken in the order given (row order: no two merges deadlock). */
async function inMutexes<T>(tablets: readonly HostedTablet[], fn: () => Promise<T>): Promise<T> {
  const [first, ...rest] = tablets;
  if (!first) return fn();
  return first.mutex.run(() => inMutexes(rest, fn));
}

function sameEndRow(a: Buffer | null, b: Buffer | null): boolean {
  return a === null || b === null ? a === b : a.equals(b);
}
