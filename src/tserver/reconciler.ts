/**
 * The tablet server's periodic backstop. Every round, a tablet whose load ended with an unknown outcome
 * (its `loc` may name this server) is loaded again; for each hosted tablet:
 *   - a tablet whose in-memory copy is stale (a change's outcome was unknown) is read back and planned;
 *   - a tablet whose queue entries could not be planned is planned again;
 *   - a tablet whose row another process changed (the manager's change feed says which: what the
 *     manager writes there — user compactions, released jobs — in case its notification was lost) is
 *     refreshed from its row. When the feed cannot say (a new manager, a cursor too old), every hosted
 *     tablet is refreshed, at most `refreshPerRound` a round: an idle server reads nothing per tablet;
 * then the round's further work (the holds whose reservations ended elsewhere); and every reservation
 * of the hosted tablets is swept: a dead compactor's reservations are cancelled,
 * again every round until that succeeds. The sweep also runs on its own every interval: a round can wait
 * long on one tablet (its mutex, a call to the manager riding a failover), and the sweep is what bounds
 * the reclaim of a death the watches missed.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { CompactorWatch, ReservationRef } from './compactor-watch.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';

/** Tablets refreshed at once (each in its own mutex). */
const REFRESH_GROUP = 100;

export interface ReconcilerOptions {
  /** Default 5 s. */
  everyMs?: number;
  /** Rows refreshed at most per round (default 500): the pace of a full refresh after a reset. */
  refreshPerRound?: number;
  /**
   * The rows changed by others since the last call, or `reset` (re-read them all); throws when the
   * manager cannot say now (the next round asks again).
   */
  changes?: () => Promise<{ reset: boolean; rows: string[] }>;
  /** More work for every round, after the tablets (the holds still waiting: hold-resolver.ts). */
  eachRound?: () => Promise<void>;
}

export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  /** Rows to refresh, in the order they became due. */
  private readonly due = new Set<string>();
  private running: Promise<void> | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly hosting: Hosting,
    private readonly watch: CompactorWatch,
    private readonly log: Logger,
    private readonly options: ReconcilerOptions = {},
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      const failed = (what: string) => (err: unknown) =>
        this.log.warn({ err: describeError(err) }, `reconciler ${what} failed; next round`);
      void this.runRound().catch(failed('round'));
      void this.runSweep().catch(failed('sweep'));
    }, this.options.everyMs ?? 5_000);
    this.timer.unref();
  }

  /**
   * No more rounds. A round in progress is not waited for: it can wait on a tablet's mutex, held by a change
   * stuck in a call to the manager for as long as that call's failover lasts (about 40 s), and the tablet
   * server must not wait that long to register again after its session was lost. What the round still
   * does is fenced: its tablets are dropped, and every change they send names the old session in `loc`.
   */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** One round now (or joins the one running). */
  runRound(): Promise<void> {
    this.running ??= this.round().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** One sweep now (or joins the one running), apart from the rounds. */
  runSweep(): Promise<void> {
    this.sweeping ??= this.sweep().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  /** Rows refreshed so far (for tests and status). */
  readonly stats = { refreshed: 0, resets: 0 };

  private async round(): Promise<void> {
    await this.hosting.retryUnsettledLoads();
    await this.followChanges();
    const budget = this.options.refreshPerRound ?? 500;
    const rows: string[] = [];
    for (const row of this.due) {
      if (rows.length >= budget) break;
      rows.push(row);
    }
    // A group at a time: the group's reads of its rows reach the manager as one request (MetaClient.row
    // gathers the reads of one turn), not one each — after a reset, 100 requests a second per server.
    for (let i = 0; i < rows.length && !this.stopped; i += REFRESH_GROUP) {
      const group = rows.slice(i, i + REFRESH_GROUP);
      for (const row of group) this.due.delete(row);
      this.stats.refreshed += group.length;
      await Promise.all(
        group.map((row) =>
          this.hosting
            .refresh(row)
            .catch((err: unknown) =>
              this.log.debug(
                { tablet: row, err: describeError(err) },
                'refreshing a tablet failed; next round',
              ),
            ),
        ),
      );
    }
    for (const tablet of this.hosting.all()) {
      if (this.stopped) return;
      try {
        if (tablet.stale || tablet.replanNeeded) await this.hosting.replan(tablet);
      } catch (err) {
        this.log.debug(
          { tablet: tablet.row, err: describeError(err) },
          'reconciling a tablet failed; next round',
        );
      }
    }
    if (this.stopped) return;
    await this.options.eachRound?.();
    if (this.stopped) return;
    await this.runSweep();
  }

  /** Marks due the hosted rows others changed (all of them on a reset). */
  private async followChanges(): Promise<void> {
    const changes = this.options.changes;
    if (!changes) return;
    let answer;
    try {
      answer = await changes();
    } catch (err) {
      this.log.debug({ err: describeError(err) }, 'reading the change feed failed; next round');
      return;
    }
    if (answer.reset) {
      this.stats.resets++;
      for (const row of this.hosting.rows()) this.due.add(row);
      this.log.info(
        { due: this.due.size },
        'change feed cannot say what changed; re-reading every hosted tablet',
      );
      return;
    }
    for (const row of answer.rows) if (this.hosting.has(row)) this.due.add(row);
  }

  private async sweep(): Promise<void> {
    const reservations: [string, ReservationRef][] = [];
    const tablets = new Map<string, HostedTablet>();
    for (const tablet of this.hosting.all()) {
      // Only the tablets with reservations: at 50,000 hosted tablets a map of them all, built every few
      // seconds, was most of an idle server's CPU.
      if (tablet.state !== 'hosted' || tablet.meta.reservations.size === 0) continue;
      tablets.set(tablet.row, tablet);
      for (const [ecid, r] of tablet.meta.reservations)
        reservations.push([r.compactor, { tablet: tablet.row, ecid }]);
    }
    if (this.stopped) return;
    // The list is checked again as the sweep goes: reservations keep ending while it waits on ZooKeeper.
    await this.watch.sweep(reservations, (ref) => {
      const tablet = tablets.get(ref.tablet);
      return tablet?.state === 'hosted' && tablet.meta.reservations.has(ref.ecid);
    });
  }
}
