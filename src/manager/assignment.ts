/**
 * Tablet assignment and balancing: every tablet of an online table is hosted by exactly one live tablet
 * server, and the tablets are spread over them (balance.ts).
 *
 * A pass reads every tablet and
 *   - clears `loc` and `future` that name a server (or a session) that is no longer live, each with a
 *     mutation conditional on the value it read, so a tablet server that lost its session can never get
 *     its tablets back by accident;
 *   - gives each unhosted tablet to the eligible server (live, not drained: drains.ts) with the fewest
 *     tablets: it writes `future` (conditional on the tablet having neither `loc` nor `future`) and asks
 *     that server to load it. The server takes the tablet with its own conditional mutation, `future` →
 *     `loc`, naming its session;
 *   - moves hosted tablets, a few at a time (balance.ts): it writes `future` beside `loc` (conditional on
 *     both), asks the old host to unload the tablet — in the tablet's mutex it deletes its `loc`, then
 *     stops serving it — and then asks the new one to load it. The new host loads the tablet with its
 *     reservations and watches their compactors, which follow the tablet there: a move cancels nothing.
 *     A move whose old host does not let go is asked again, and given up after `moveTimeoutMs`.
 *
 * Passes run when the live servers change, when asked, within `intervalMs` of a mutation that changed
 * placement (balance.ts, affectsPlacement), and every `intervalMs` while work is under way (a lost load or
 * unload is sent again then); once all is hosted and balanced, only as a backstop (balance.ts, backstopAfter). Loads go in
 * batches per server (load-sender.ts).
 */
import { Coalesced } from '../coalesce.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { ALL_TABLETS } from '../meta/keys.js';
import type { MetaBackend } from '../meta/backend.js';
import { COL_FUTURE, COL_LOC, locationValue, type Location, type TabletMeta } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import type { PeerClients } from '../rpc/peers.js';
import {
  affectsPlacement,
  backstopAfter,
  leastLoaded,
  pinRows,
  planMoves,
  type PlacedTablet,
} from './balance.js';
import type { CommitQueue } from './commit-queue.js';
import { drains, readDrains } from './drains.js';
import type { LiveTservers } from './live-tservers.js';
import { LoadSender } from './load-sender.js';
import { readTablets } from './tables.js';

export interface AssignerOptions {
  /** Pass again this soon while work is under way or after a change of placement (default 2 s). */
  intervalMs?: number;
  /** Pass this often when all is settled (default 60 s): the backstop. */
  backstopMs?: number;
  /** Resend a load or unload that has not taken effect after this long (default 3 s). */
  resendAfterMs?: number;
  /** Moves under way at once (default 8; 0: no balancing). */
  maxMoves?: number;
  /** Give a move up when its old host has not let go after this long (default 30 s). */
  moveTimeoutMs?: number;
  /** Told every tablet a pass read, after it (automatic merges look for neighbours to merge). */
  onPass?: (tablets: readonly TabletMeta[]) => void;
}

interface Placement {
  tablet: string;
  loc: Location;
  mutation: Mutation;
  from?: Location;
}

export class Assigner {
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (0: no timer). */
  private dueAt = 0;
  private stopped = false;
  private unlisten: (() => void) | undefined;
  private readonly passes = new Coalesced(
    () => this.pass(),
    (err) => this.log.warn({ err: describeError(err) }, 'assignment pass failed'),
  );
  private readonly sentAt = new Map<string, number>();
  private readonly loads = new LoadSender((tablets, loc) => this.postLoads(tablets, loc));
  /** Moves under way: tablet row → when the move was written. */
  private readonly movingSince = new Map<string, number>();
  /** Tablets the balancer leaves where they are (a merge gathering them): row → how many pinned it. */
  private readonly pinned = new Map<string, number>();
  /** Tablets the last pass read. */
  private lastRead = 0;
  /** Statistics for /status and tests. */
  readonly stats = { passes: 0, assigned: 0, cleared: 0, moved: 0, movesGivenUp: 0 };

  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly live: LiveTservers,
    /** The ids of the tables whose tablets are to be hosted (not being deleted). */
    private readonly onlineTables: () => Promise<Set<string>>,
    private readonly peers: PeerClients,
    private readonly log: Logger,
    private readonly options: AssignerOptions = {},
  ) {}

  start(): void {
    this.live.on('changed', this.onChanged);
    this.unlisten = this.commits.onApplied(({ changed }) => {
      if (changed.some(affectsPlacement)) this.schedule(this.options.intervalMs ?? 2_000);
    });
    void this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unlisten?.();
    this.live.off('changed', this.onChanged);
    await this.passes.stop();
  }

  /** A pass within `ms` (sooner if one is due sooner already). */
  private schedule(ms: number): void {
    if (this.stopped) return;
    const at = Date.now() + ms;
    if (this.dueAt !== 0 && this.dueAt <= at) return;
    clearTimeout(this.timer);
    this.dueAt = at;
    this.timer = setTimeout(() => {
      this.dueAt = 0;
      void this.kick();
    }, ms);
    this.timer.unref();
  }

  private readonly onChanged = (): void => void this.kick();

  /** Keeps the balancer off these tablets until the function returned is called (a merge gathers them). */
  pin(rows: readonly string[]): () => void {
    return pinRows(this.pinned, rows);
  }

  /**
   * Moves `tablet` to `server` now, as the balancer would (a merge gathering its tablets on one server).
   * Resolves false when that cannot start: the tablet is not hosted by a live server, already moving, or
   * changed since it was read.
   */
  async moveTo(tablet: TabletMeta, server: string): Promise<boolean> {
    const session = this.live.sessionOf(server);
    const from = tablet.loc;
    if (!session || !from || tablet.future || !this.live.isLive(from.server, from.session)) return false;
    if (from.server === server) return true;
    const to: Location = { server, session };
    const [result] = await this.commits.submit({
      mutations: [
        {
          conditions: [
            { op: 'equals', row: tablet.row, col: COL_LOC, value: locationValue(from) },
            { op: 'absent', row: tablet.row, col: COL_FUTURE },
          ],
          puts: [{ row: tablet.row, col: COL_FUTURE, value: locationValue(to) }],
        },
      ],
    });
    if (!result?.applied) return false;
    this.stats.moved++;
    this.movingSince.set(tablet.row, Date.now());
    this.log.info({ tablet: tablet.row, from: from.server, to: server, why: 'merge' }, 'tablet moving');
    this.handOver(tablet.row, from, to);
    return true;
  }

  /** Runs a pass soon; passes never overlap, and requests during a pass cause one more. */
  kick(): Promise<void> {
    return this.passes.run();
  }

  private async pass(): Promise<void> {
    let settled = false;
    try {
      settled = await this.placeAll();
    } finally {
      // A pass that failed is tried again soon, as is one that left work under way.
      const backstop = backstopAfter(this.options.backstopMs ?? 60_000, this.lastRead);
      this.schedule(settled ? backstop : (this.options.intervalMs ?? 2_000));
    }
  }

  /** One pass; true when it found nothing to do and nothing under way. */
  private async placeAll(): Promise<boolean> {
    this.stats.passes++;
    const readAt = Date.now();
    const [tablets, online, drained] = await Promise.all([
      readTablets(this.store, ALL_TABLETS.start, ALL_TABLETS.end),
      this.onlineTables(),
      readDrains(this.store),
    ]);
    this.lastRead = tablets.length;
    this.options.onPass?.(tablets);
    const liveNow = [...this.live.all];
    const eligible = liveNow.filter(([s, session]) => !drains(drained.get(s), session)).map(([s]) => s);
    const leaving = new Set(
      liveNow.filter(([s, session]) => drains(drained.get(s), session)).map(([s]) => s),
    );
    // With every live server drained, they still host: a tablet is never left with no host at all.
    const targets = eligible.length > 0 ? eligible : liveNow.map(([s]) => s);
    const load = new Map<string, number>(targets.map((s) => [s, 0]));
    const unhosted: TabletMeta[] = [];
    const cleanups: { tablet: string; mutation: Mutation }[] = [];
    const placed: PlacedTablet[] = [];
    const moving: (Pick<PlacedTablet, 'tableId' | 'bytes'> & { to: string })[] = [];
    const giveUp: Mutation[] = [];
    const reload: { tablet: string; loc: Location; cleanup: number }[] = [];
    /** Tablets with a load or a move under way. */
    const underWay = new Set<string>();

    for (const tablet of tablets) {
      const cleanup: Mutation = { conditions: [], deletes: [] };
      const liveLoc = tablet.loc && this.live.isLive(tablet.loc.server, tablet.loc.session);
      const liveFuture = tablet.future && this.live.isLive(tablet.future.server, tablet.future.session);
      for (const [col, loc, live] of [
        [COL_LOC, tablet.loc, liveLoc],
        [COL_FUTURE, tablet.future, liveFuture],
      ] as const) {
        if (!loc || live) continue;
        cleanup.conditions!.push({ op: 'equals', row: tablet.row, col, value: locationValue(loc) });
        cleanup.deletes!.push({ row: tablet.row, col });
      }
      if (cleanup.deletes!.length > 0) cleanups.push({ tablet: tablet.row, mutation: cleanup });
      const bytes = [...tablet.files.values()].reduce((n, f) => n + f.size, 0);
      const dest = liveFuture ? tablet.future! : liveLoc ? tablet.loc! : undefined;
      if (dest && load.has(dest.server)) load.set(dest.server, load.get(dest.server)! + 1);
      if (liveFuture) underWay.add(tablet.row);
      if (liveLoc && liveFuture) {
        // A move under way: the old host is asked (again) to let go, or the move is given up.
        moving.push({ tableId: tablet.tableId, bytes, to: tablet.future!.server });
        this.continueMove(tablet, giveUp);
      } else if (liveFuture) {
        this.movingSince.delete(tablet.row);
        // The old host of a move died: the new one loads it once its loc is cleared (below), not after
        // the resend delay of the load sent with the move.
        if (tablet.loc)
          reload.push({ tablet: tablet.row, loc: tablet.future!, cleanup: cleanups.length - 1 });
        else this.maybeResend(tablet.row, tablet.future!);
      } else if (liveLoc) {
        this.movingSince.delete(tablet.row);
        this.sentAt.delete(tablet.row);
        placed.push({
          row: tablet.row,
          tableId: tablet.tableId,
          server: tablet.loc!.server,
          bytes,
          reservations: tablet.reservations.size,
        });
      } else if (online.has(tablet.tableId)) unhosted.push(tablet);
    }

    const placements: Placement[] = [];
    for (const tablet of unhosted) {
      const server = leastLoaded(load);
      if (!server) break; // no live tablet server: nothing can be assigned now
      const loc: Location = { server, session: this.live.sessionOf(server)! };
      load.set(server, (load.get(server) ?? 0) + 1);
      placements.push({
        tablet: tablet.row,
        loc,
        mutation: {
          conditions: [
            { op: 'absent', row: tablet.row, col: COL_LOC },
            { op: 'absent', row: tablet.row, col: COL_FUTURE },
          ],
          puts: [{ row: tablet.row, col: COL_FUTURE, value: locationValue(loc) }],
        },
      });
    }
    const byRow = new Map(tablets.map((t) => [t.row, t]));
    const maxMoves = Math.max(0, (this.options.maxMoves ?? 8) - moving.length);
    const hosted = placed.filter((t) => online.has(t.tableId) && !this.pinned.has(t.row));
    for (const m of planMoves({ tablets: hosted, moving, eligible, drained: leaving, maxMoves })) {
      const tablet = byRow.get(m.tablet)!;
      const loc: Location = { server: m.to, session: this.live.sessionOf(m.to)! };
      placements.push({
        tablet: m.tablet,
        loc,
        from: tablet.loc!,
        mutation: {
          conditions: [
            { op: 'equals', row: m.tablet, col: COL_LOC, value: locationValue(tablet.loc!) },
            { op: 'absent', row: m.tablet, col: COL_FUTURE },
          ],
          puts: [{ row: m.tablet, col: COL_FUTURE, value: locationValue(loc) }],
        },
      });
    }
    // What this pass did not see under way is over (hosted, its tablet gone): no resend is due.
    // (Entries made since the read are of loads and moves it could not see yet.)
    for (const [row, at] of this.sentAt) if (at < readAt && !underWay.has(row)) this.sentAt.delete(row);
    for (const [row, at] of this.movingSince)
      if (at < readAt && !underWay.has(row)) this.movingSince.delete(row);
    if (cleanups.length === 0 && placements.length === 0 && giveUp.length === 0) {
      // Unhosted tablets with no server to take them wait for one: a server joining kicks a pass.
      return underWay.size === 0;
    }

    // One submission, one fsync, however many tablets a dead server left behind. Mutations apply in
    // order, so a tablet whose dead location is cleared here is assigned in the same transaction.
    const results = await this.commits.submit({
      mutations: [...cleanups, ...placements, ...giveUp.map((mutation) => ({ mutation }))].map(
        (c) => c.mutation,
      ),
    });
    // One log line a pass, not one per tablet: a dead server may leave tens of thousands.
    const cleared = cleanups.filter((_, i) => results[i]?.applied).length;
    this.stats.cleared += cleared;
    for (const r of reload) if (results[r.cleanup]?.applied) this.loads.enqueue(r.tablet, r.loc);
    const assigned = new Map<string, number>();
    placements.forEach(({ tablet, loc, from }, i) => {
      if (!results[cleanups.length + i]?.applied) return; // changed under us: the next pass looks again
      if (from) {
        this.stats.moved++;
        this.movingSince.set(tablet, Date.now());
        this.log.info({ tablet, from: from.server, to: loc.server }, 'tablet moving');
        this.handOver(tablet, from, loc);
        return;
      }
      this.stats.assigned++;
      assigned.set(loc.server, (assigned.get(loc.server) ?? 0) + 1);
      this.loads.enqueue(tablet, loc);
    });
    if (cleared > 0 || assigned.size > 0)
      this.log.info({ cleared, assigned: Object.fromEntries(assigned) }, 'tablets assigned');
    return false;
  }

  /** A move under way: ask the old host again to let go, or give the move up when it will not. */
  private continueMove(tablet: TabletMeta, giveUp: Mutation[]): void {
    const since = this.movingSince.get(tablet.row);
    const now = Date.now();
    if (since === undefined) {
      // Found in the store (written by a manager before a failover): this one takes it from here.
      this.movingSince.set(tablet.row, now);
      this.handOver(tablet.row, tablet.loc!, tablet.future!);
      return;
    }
    if (now - since > (this.options.moveTimeoutMs ?? 30_000)) {
      this.stats.movesGivenUp++;
      this.movingSince.delete(tablet.row);
      this.log.warn(
        { tablet: tablet.row, from: tablet.loc!.server, to: tablet.future!.server },
        'move given up: the old host did not let the tablet go',
      );
      giveUp.push({
        conditions: [
          { op: 'equals', row: tablet.row, col: COL_LOC, value: locationValue(tablet.loc!) },
          { op: 'equals', row: tablet.row, col: COL_FUTURE, value: locationValue(tablet.future!) },
        ],
        deletes: [{ row: tablet.row, col: COL_FUTURE }],
      });
      return;
    }
    const sent = this.sentAt.get(tablet.row);
    if (sent === undefined || now - sent > (this.options.resendAfterMs ?? 3_000))
      this.handOver(tablet.row, tablet.loc!, tablet.future!);
  }

  /** The old host unloads the tablet (its `loc` deleted in its mutex), then the new one loads it. */
  private handOver(tablet: string, from: Location, to: Location): void {
    this.sentAt.set(tablet, Date.now());
    this.peers
      .get(from.server)
      .post('/v1/tablets/unload', { tablet }, { idempotent: true, attempts: 2, timeoutMs: 10_000 })
      .then(
        () => this.loads.enqueue(tablet, to),
        (err: unknown) =>
          this.log.warn({ tablet, server: from.server, err: describeError(err) }, 'unload for a move failed'),
      );
  }

  private maybeResend(tablet: string, loc: Location): void {
    if (this.loads.has(tablet, loc)) return;
    const sent = this.sentAt.get(tablet);
    if (sent === undefined || Date.now() - sent > (this.options.resendAfterMs ?? 3_000))
      this.loads.enqueue(tablet, loc);
  }

  /** One load request for many tablets (through `loads`: a bounded number at once per server). */
  private async postLoads(tablets: string[], loc: Location): Promise<void> {
    for (const t of tablets) this.sentAt.set(t, Date.now());
    try {
      const { loaded, failed } = await this.peers.get(loc.server).post<{
        loaded: string[];
        failed: { tablet: string; error: string }[];
      }>('/v1/tablets/load', { tablets, session: loc.session }, { idempotent: true, attempts: 2, timeoutMs: 30_000 });
      // Loaded: the next moves need not wait for the periodic pass.
      if (loaded.filter((t) => this.movingSince.delete(t)).length > 0) void this.kick();
      if (failed.length > 0)
        this.log.warn({ server: loc.server, failed: failed.length, first: failed[0] }, 'loads refused');
    } catch (err) {
      const tablet = tablets[0];
      this.log.warn(
        { tablet, tablets: tablets.length, server: loc.server, err: describeError(err) },
        'load failed',
      );
    }
  }
}
