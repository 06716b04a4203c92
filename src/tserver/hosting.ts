/**
 * The tablets this server hosts: loading (taking a tablet with a conditional mutation naming this server's
 * session), unloading, refreshing, reading back, and the entry to the one path by which every change to a
 * hosted tablet is applied (apply-change.ts).
 *
 * Loading reads the tablet's files and reservations, watches each reservation's compactor (the watch reports
 * those already gone, which cancels their reservations), then plans and queues its work.
 *
 * A change whose outcome is unknown (the manager's answer was lost: a timeout, a connection cut after the
 * request went out) may or may not have been applied. The tablet is then read again from the store before
 * anything else happens to it, so the in-memory copy never drifts from what the store holds.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import {
  COL_FUTURE,
  COL_LOC,
  locationValue,
  parseTablet,
  type Location,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import type { PlannedJob } from '../queue/planner.js';
import type { QueueResolver } from '../queue/resolver.js';
import type { CompactorWatch } from './compactor-watch.js';
import { HostedTablet, planTablet } from './hosted-tablet.js';
import { applyChange, type ApplyDeps } from './apply-change.js';
import type { TabletChange } from './tablet-change.js';

export type { TabletChange } from './tablet-change.js';
import type { TableConfigs } from './table-configs.js';
import { certainlyNotApplied, readTabletRow } from './tablet-row.js';

export interface HostingDeps {
  me: Location;
  meta: MetaClient;
  queues: QueueResolver;
  configs: TableConfigs;
  watch: CompactorWatch;
  log: Logger;
  /** Called when the manager rejects a mutation because our session is gone: the server must stop. */
  onFenced: (err: ExcError) => void;
  /** How long to keep trying to read a tablet back after an unknown outcome (default 30 s). */
  resyncForMs?: number;
  /** Called after a tablet was loaded, or refreshed from its row (outside its mutex). */
  onRefreshed?: (tablet: HostedTablet) => void;
  /** Called after a change was applied to a tablet (inside its mutex: do not wait on it there). */
  onChanged?: (tablet: HostedTablet) => void;
}

export class Hosting {
  private readonly tablets = new Map<string, HostedTablet>();
  private readonly loading = new Map<string, Promise<void>>();
  /**
   * Rows whose takeover (`future` → `loc`) had an unknown outcome: the store may name this server while it
   * hosts nothing, and the manager then never sends the load again. The reconciler retries them.
   */
  private readonly unsettled = new Set<string>();

  /** What {@link change} needs of this host. */
  private readonly applying: ApplyDeps;

  constructor(private readonly deps: HostingDeps) {
    this.applying = {
      queues: deps.queues,
      log: deps.log,
      mutate: (mutations) => this.mutate(mutations),
      resync: (tablet) => this.resync(tablet),
      drop: (tablet, reason) => this.drop(tablet, reason),
      planFor: (tablet, meta) => this.planFor(tablet, meta),
      changed: (tablet) => deps.onChanged?.(tablet),
    };
  }

  get count(): number {
    return this.tablets.size;
  }

  all(): HostedTablet[] {
    return [...this.tablets.values()];
  }

  /** Whether the tablet is hosted here or being loaded. */
  has(row: string): boolean {
    return this.tablets.has(row) || this.loading.has(row);
  }

  /** The rows of every tablet hosted here or being loaded. */
  rows(): string[] {
    return [...new Set([...this.tablets.keys(), ...this.loading.keys()])];
  }

  /**
   * The hosted tablet, read back from the store first if it is stale; NOT_SERVING naming where it is
   * hosted now (when known) if it is not hosted here.
   */
  async get(row: string): Promise<HostedTablet> {
    // Being loaded: its location may already name this server (the load's mutation wrote it), so a
    // client that read it is here already; it gets the tablet once loaded, not NOT_SERVING naming us.
    await this.loading.get(row)?.catch(() => undefined);
    const tablet = this.tablets.get(row);
    if (tablet && tablet.state === 'hosted') {
      if (tablet.stale) await tablet.mutex.run(() => this.resync(tablet));
      if (tablet.state === 'hosted') return tablet;
    }
    let location: string | null = null;
    try {
      const cols = await this.deps.meta.row(row);
      const loc = cols.get(COL_LOC);
      location = loc ? (JSON.parse(loc) as Location).server : null;
    } catch {
      // unknown is fine
    }
    throw new ExcError(
      'NOT_SERVING',
      `tablet ${row} is not hosted here${location ? `; it is at ${location}` : ''}`,
      {
        details: { tablet: row, location },
      },
    );
  }

  /** Loads a tablet the manager assigned to this server (idempotent). */
  load(row: string): Promise<void> {
    if (this.tablets.has(row)) return Promise.resolve();
    let pending = this.loading.get(row);
    if (!pending) {
      pending = this.doLoad(row).finally(() => this.loading.delete(row));
      this.loading.set(row, pending);
    }
    return pending;
  }

  private async doLoad(row: string): Promise<void> {
    const { me, log } = this.deps;
    let current = parseTablet(row, await this.readRow(row));
    const mine = locationValue(me);
    if (current.loc && locationValue(current.loc) === mine) {
      // Ours already (a load request repeated after we took it).
    } else if (current.future && locationValue(current.future) === mine && !current.loc) {
      // Assigned just before its table went offline (or was deleted): not taken.
      const settings = await this.deps.configs.get(current.tableId).catch(() => undefined);
      if (settings && settings.state !== 'online')
        throw new ExcError('CONFLICT', `tablet ${row} is not loaded: its table is ${settings.state}`, {
          details: { tablet: row },
        });
      let applied: boolean;
      try {
        const [result] = await this.mutate([
          {
            conditions: [
              { op: 'equals', row, col: COL_FUTURE, value: mine },
              { op: 'absent', row, col: COL_LOC },
            ],
            puts: [{ row, col: COL_LOC, value: mine }],
            deletes: [{ row, col: COL_FUTURE }],
          },
        ]);
        applied = result?.applied === true;
      } catch (err) {
        if (certainlyNotApplied(err)) throw err;
        // The answer was lost: the tablet is ours if the store says so. Until a load settles it (the read
        // below can fail too, or the change be applied after it), the reconciler tries again.
        this.unsettled.add(row);
        current = parseTablet(row, await this.readRow(row));
        applied = current.loc !== undefined && locationValue(current.loc) === mine;
      }
      if (!applied)
        throw new ExcError('CONFLICT', `tablet ${row} changed while loading; the manager will retry`);
      current.loc = me;
      delete current.future;
    } else {
      throw new ExcError('CONFLICT', `tablet ${row} is not assigned to this server`, {
        details: { tablet: row },
      });
    }
    const tablet = new HostedTablet(current, me);
    this.tablets.set(row, tablet);
    this.unsettled.delete(row);
    log.info(
      { tablet: row, files: current.files.size, reservations: current.reservations.size },
      'tablet loaded',
    );

    // Reservations made under the previous host: watch their compactors. The watch reports those already
    // gone as soon as they are recorded, which cancels them (the reconciler retries a cancellation that
    // fails now). Their progress clock starts now: their reports went to the previous host.
    for (const [ecid, r] of current.reservations) {
      tablet.startProgressClock(ecid);
      const alive = await this.deps.watch.checkAndWatch(r.compactor).catch(() => true);
      if (!alive)
        log.info(
          { tablet: row, ecid, compactor: r.compactor },
          'reservation of a dead compactor found on load',
        );
      this.deps.watch.add(r.compactor, { tablet: row, ecid });
    }
    await tablet.mutex.run(() => this.change(tablet, { replan: true }));
    // What the manager changed while no one hosted the tablet (requests cancelled) is acted on now.
    if (tablet.state === 'hosted') this.deps.onRefreshed?.(tablet);
  }

  /**
   * Rows about to be created here (a split's new daughters): until `done` settles, a request for one waits
   * for it, as for a tablet being loaded, instead of hearing NOT_SERVING.
   */
  expect(rows: readonly string[], done: Promise<void>): void {
    for (const row of rows) {
      const pending = done.finally(() => {
        if (this.loading.get(row) === pending) this.loading.delete(row);
      });
      this.loading.set(row, pending);
    }
  }

  /**
   * Hosts a tablet this server has just created with its own mutation (a daughter of a split): its row
   * names this server already. Its queue entries are planned by the caller's next change.
   */
  adopt(meta: TabletMeta): HostedTablet {
    const existing = this.tablets.get(meta.row);
    if (existing) return existing;
    const tablet = new HostedTablet(meta, this.deps.me);
    this.tablets.set(meta.row, tablet);
    this.deps.log.info(
      { tablet: meta.row, files: meta.files.size, holds: meta.holds.size },
      'tablet created by a split',
    );
    return tablet;
  }

  /** Loads again the rows of {@link unsettled}: until one is hosted, or found assigned elsewhere (CONFLICT). */
  async retryUnsettledLoads(): Promise<void> {
    for (const row of [...this.unsettled]) {
      this.unsettled.delete(row);
      await this.load(row).catch((err: unknown) => {
        if (!(err instanceof ExcError && err.code === 'CONFLICT')) this.unsettled.add(row);
        this.deps.log.info({ tablet: row, err: describeError(err) }, 'load with an unknown outcome retried');
      });
    }
  }

  /**
   * Stops hosting a tablet and gives up its location (when it is still ours): the manager moving it to
   * another server, or taking it away. In its mutex, so no change of it is in flight: its `loc` is deleted
   * first — conditional on naming this server — and only then is it dropped here, so it is never left
   * named here and hosted nowhere. When the store cannot be told (the manager is away), the tablet stays
   * hosted and the error is thrown: the manager asks again. An unknown outcome is read back.
   */
  async unload(row: string, reason: string): Promise<void> {
    const tablet = this.tablets.get(row);
    if (!tablet) return;
    await tablet.mutex.run(async () => {
      if (tablet.state === 'gone') return;
      try {
        await this.mutate([{ conditions: [tablet.locCondition()], deletes: [{ row, col: COL_LOC }] }]);
      } catch (err) {
        if (certainlyNotApplied(err)) throw err;
        const fresh = parseTablet(row, await this.readRow(row));
        if (fresh.loc && locationValue(fresh.loc) === locationValue(this.deps.me)) throw err;
      }
      // Deleted now, or not ours any more (its condition failed): either way not served here.
      this.drop(tablet, reason);
    });
  }

  /**
   * Re-reads a tablet's row for what the manager writes there (user compactions, released failures) and
   * re-plans. A tablet still loading is refreshed once loaded, so a notification never falls in between.
   */
  async refresh(row: string): Promise<void> {
    await this.loading.get(row)?.catch(() => undefined);
    const tablet = this.tablets.get(row);
    if (!tablet) return;
    await tablet.mutex.run(async () => {
      if (tablet.state !== 'hosted') return;
      await this.rereadRequests(tablet);
      if (tablet.state === 'hosted') await this.change(tablet, { replan: true });
    });
    if (tablet.state === 'hosted') this.deps.onRefreshed?.(tablet);
  }

  /**
   * Reads again what the manager writes in a tablet's row (its user compactions and failure records),
   * for a caller holding the tablet's mutex; the whole tablet when its copy is stale. A tablet whose
   * location is not ours any more is dropped.
   */
  async rereadRequests(tablet: HostedTablet): Promise<void> {
    if (tablet.stale) {
      await this.resync(tablet);
      return;
    }
    const fresh = parseTablet(tablet.row, await this.deps.meta.row(tablet.row));
    if (!fresh.loc || locationValue(fresh.loc) !== locationValue(this.deps.me)) {
      this.drop(tablet, 'location changed');
      return;
    }
    tablet.meta.userCompactions = fresh.userCompactions;
    tablet.meta.failures = fresh.failures;
    tablet.meta.requests = fresh.requests;
  }

  /**
   * Plans a tablet's queue entries again, for a change outside the tablet (a queue added or deleted) or a
   * plan that failed. A stale tablet is read back first (by `change`).
   */
  async replan(tablet: HostedTablet): Promise<void> {
    await tablet.mutex.run(async () => {
      if (tablet.state === 'hosted') await this.change(tablet, { replan: true });
    });
  }

  /**
   * Reads a tablet back from the store after a change with an unknown outcome (inside its mutex). Keeps
   * trying while the manager does not answer; a tablet that is no longer ours is dropped. On failure the
   * tablet stays stale and the error is thrown; the next use tries again.
   */
  async resync(tablet: HostedTablet): Promise<void> {
    if (tablet.state !== 'hosted') return;
    const fresh = parseTablet(tablet.row, await this.readRow(tablet.row));
    if (!fresh.loc || locationValue(fresh.loc) !== locationValue(this.deps.me)) {
      this.drop(tablet, 'location changed');
      return;
    }
    const { watch } = this.deps;
    for (const [ecid, r] of tablet.meta.reservations) {
      if (fresh.reservations.has(ecid)) continue;
      watch.remove(r.compactor, ecid);
      tablet.forgetProgress(ecid);
    }
    for (const [ecid, r] of fresh.reservations) {
      if (tablet.meta.reservations.has(ecid)) continue;
      watch.add(r.compactor, { tablet: tablet.row, ecid });
      tablet.startProgressClock(ecid);
    }
    tablet.meta = fresh;
    tablet.stale = false;
    this.deps.log.info(
      { tablet: tablet.row, files: fresh.files.size, reservations: fresh.reservations.size },
      'tablet read back from the store',
    );
  }

  /** Stops serving every tablet at once: the session whose `loc` they carry is gone. */
  dropAll(reason: string): void {
    for (const tablet of [...this.tablets.values()]) this.drop(tablet, reason);
  }

  /** Stops serving a tablet locally (it was lost or unloaded). */
  drop(tablet: HostedTablet, reason: string): void {
    if (tablet.state === 'gone') return;
    tablet.state = 'gone';
    this.tablets.delete(tablet.row);
    for (const [ecid, r] of tablet.meta.reservations) this.deps.watch.remove(r.compactor, ecid);
    this.deps.log.info({ tablet: tablet.row, reason }, 'tablet unloaded');
  }

  /** Applies a change to a hosted tablet: call inside `tablet.mutex` (see apply-change.ts). */
  change(tablet: HostedTablet, change: TabletChange): Promise<boolean> {
    return applyChange(tablet, change, this.applying);
  }

  /**
   * The jobs a tablet (in the given state) wants, with its table's settings; none for a table that is
   * gone or being deleted. Throws when the settings cannot be read.
   */
  async planFor(tablet: HostedTablet, meta: TabletMeta = tablet.meta): Promise<PlannedJob[]> {
    let settings;
    try {
      settings = await this.deps.configs.get(tablet.meta.tableId);
    } catch (err) {
      if (err instanceof ExcError && err.code === 'UNKNOWN_TABLE') return [];
      throw err;
    }
    if (settings.state !== 'online' || tablet.closing) return [];
    return planTablet(meta, settings.config);
  }

  private readRow(row: string): Promise<Map<string, string>> {
    return readTabletRow(this.deps.meta, row, this.deps.resyncForMs ?? 30_000);
  }

  private async mutate(mutations: Mutation[]) {
    try {
      return await this.deps.meta.mutate(mutations, {
        server: this.deps.me.server,
        session: this.deps.me.session,
      });
    } catch (err) {
      if (err instanceof ExcError && err.code === 'FENCED') this.deps.onFenced(err);
      throw err;
    }
  }
}
