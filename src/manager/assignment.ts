/**
 * Tablet assignment: every tablet of an online table is hosted by exactly one live tablet server.
 *
 * A pass reads every tablet and
 *   - clears `loc` and `future` that name a server (or a session) that is no longer live, each with a
 *     mutation conditional on the value it read, so a tablet server that lost its session can never get
 *     its tablets back by accident;
 *   - gives each unhosted tablet to the live server with the fewest tablets: it writes `future`
 *     (conditional on the tablet having neither `loc` nor `future`) and asks that server to load it. The
 *     server takes the tablet with its own conditional mutation, `future` → `loc`, naming its session.
 *
 * Passes run when the set of live servers changes, when asked (table created), and periodically; a load
 * request that got lost is sent again on a later pass.
 */
import { Coalesced } from '../coalesce.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { ALL_TABLETS } from '../meta/keys.js';
import type { MetaBackend } from '../meta/backend.js';
import { COL_FUTURE, COL_LOC, locationValue, type Location, type TabletMeta } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import type { PeerClients } from '../rpc/peers.js';
import type { CommitQueue } from './commit-queue.js';
import type { LiveTservers } from './live-tservers.js';
import { readTablets } from './tables.js';

export interface AssignerOptions {
  /** Periodic pass (default 2 s). */
  intervalMs?: number;
  /** Resend a load that has not taken effect after this long (default 3 s). */
  resendAfterMs?: number;
}

export class Assigner {
  private timer: NodeJS.Timeout | undefined;
  private readonly passes = new Coalesced(
    () => this.pass(),
    (err) => this.log.warn({ err: describeError(err) }, 'assignment pass failed'),
  );
  private readonly sentAt = new Map<string, number>();
  /** Statistics for /status and tests. */
  readonly stats = { passes: 0, assigned: 0, cleared: 0 };

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
    this.timer = setInterval(() => void this.kick(), this.options.intervalMs ?? 2_000);
    this.timer.unref();
    void this.kick();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.live.off('changed', this.onChanged);
    await this.passes.stop();
  }

  private readonly onChanged = (): void => void this.kick();

  /** Runs a pass soon; passes never overlap, and requests during a pass cause one more. */
  kick(): Promise<void> {
    return this.passes.run();
  }

  private async pass(): Promise<void> {
    this.stats.passes++;
    const [tablets, online] = await Promise.all([
      readTablets(this.store, ALL_TABLETS.start, ALL_TABLETS.end),
      this.onlineTables(),
    ]);
    const load = new Map<string, number>([...this.live.all.keys()].map((s) => [s, 0]));
    const unhosted: TabletMeta[] = [];
    const cleanups: { tablet: string; mutation: Mutation }[] = [];

    for (const tablet of tablets) {
      const cleanup: Mutation = { conditions: [], deletes: [] };
      let hosted = false;
      for (const [col, loc] of [
        [COL_LOC, tablet.loc],
        [COL_FUTURE, tablet.future],
      ] as const) {
        if (!loc) continue;
        if (this.live.isLive(loc.server, loc.session)) {
          hosted = true;
          load.set(loc.server, (load.get(loc.server) ?? 0) + 1);
          if (col === COL_FUTURE) this.maybeResend(tablet.row, loc);
          else this.sentAt.delete(tablet.row);
        } else {
          cleanup.conditions!.push({ op: 'equals', row: tablet.row, col, value: locationValue(loc) });
          cleanup.deletes!.push({ row: tablet.row, col });
        }
      }
      if (cleanup.deletes!.length > 0) cleanups.push({ tablet: tablet.row, mutation: cleanup });
      if (!hosted && online.has(tablet.tableId)) unhosted.push(tablet);
    }

    const assignments: { tablet: string; loc: Location; mutation: Mutation }[] = [];
    for (const tablet of unhosted) {
      const server = leastLoaded(load);
      if (!server) break; // no live tablet server: nothing can be assigned now
      const loc: Location = { server, session: this.live.sessionOf(server)! };
      load.set(server, (load.get(server) ?? 0) + 1);
      assignments.push({
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
    if (cleanups.length === 0 && assignments.length === 0) return;

    // One submission, one fsync, however many tablets a dead server left behind. Mutations apply in
    // order, so a tablet whose dead location is cleared here is assigned in the same transaction.
    const results = await this.commits.submit({
      mutations: [...cleanups, ...assignments].map((c) => c.mutation),
    });
    cleanups.forEach(({ tablet, mutation }, i) => {
      if (!results[i]?.applied) return;
      this.stats.cleared++;
      this.log.info(
        { tablet, dead: mutation.deletes!.map((d) => d.col) },
        'cleared location of a dead tablet server',
      );
    });
    assignments.forEach(({ tablet, loc }, i) => {
      if (!results[cleanups.length + i]?.applied) return; // changed under us: the next pass looks again
      this.stats.assigned++;
      this.log.info({ tablet, server: loc.server }, 'tablet assigned');
      this.sendLoad(tablet, loc);
    });
  }

  private maybeResend(tablet: string, loc: Location): void {
    const sent = this.sentAt.get(tablet);
    if (sent === undefined || Date.now() - sent > (this.options.resendAfterMs ?? 3_000))
      this.sendLoad(tablet, loc);
  }

  private sendLoad(tablet: string, loc: Location): void {
    this.sentAt.set(tablet, Date.now());
    this.peers
      .get(loc.server)
      .post(
        '/v1/tablets/load',
        { tablet, session: loc.session },
        { idempotent: true, attempts: 2, timeoutMs: 5_000 },
      )
      .catch((err: unknown) =>
        this.log.warn({ tablet, server: loc.server, err: describeError(err) }, 'load request failed'),
      );
  }
}

function leastLoaded(load: Map<string, number>): string | undefined {
  let best: string | undefined;
  for (const [server, n] of load) {
    if (best === undefined || n < load.get(best)! || (n === load.get(best) && server < best)) best = server;
  }
  return best;
}
