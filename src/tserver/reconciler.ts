/**
 * The tablet server's periodic backstop. Every round, a tablet whose load ended with an unknown outcome
 * (its `loc` may name this server) is loaded again; for each hosted tablet:
 *   - a tablet whose in-memory copy is stale (a change's outcome was unknown) is read back and planned;
 *   - a tablet whose queue entries could not be planned is planned again;
 *   - every few rounds the tablet is refreshed from its row, for what the manager writes there (user
 *     compactions, released jobs) in case its notification was lost;
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

export interface ReconcilerOptions {
  /** Default 5 s. */
  everyMs?: number;
  /** Refresh every tablet from its row every this many rounds (default 6). */
  refreshEvery?: number;
  /** More work for every round, after the tablets (the holds still waiting: hold-resolver.ts). */
  eachRound?: () => Promise<void>;
}

export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  private rounds = 0;
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

  private async round(): Promise<void> {
    const refresh = ++this.rounds % (this.options.refreshEvery ?? 6) === 0;
    await this.hosting.retryUnsettledLoads();
    for (const tablet of this.hosting.all()) {
      if (this.stopped) return;
      try {
        if (refresh) await this.hosting.refresh(tablet.row);
        else if (tablet.stale || tablet.replanNeeded) await this.hosting.replan(tablet);
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

  private async sweep(): Promise<void> {
    const reservations: [string, ReservationRef][] = [];
    const tablets = new Map<string, HostedTablet>();
    for (const tablet of this.hosting.all()) {
      if (tablet.state !== 'hosted') continue;
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
