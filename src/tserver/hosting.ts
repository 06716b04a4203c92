/**
 * The tablets this server hosts: loading (taking a tablet with a conditional mutation naming this server's
 * session), unloading, refreshing, and the one path by which every change to a hosted tablet is applied.
 *
 * Loading reads the tablet's files and reservations, watches each reservation's compactor and cancels the
 * reservations whose compactor is already gone, then plans and queues its work.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import {
  COL_FUTURE,
  COL_LOC,
  compactCol,
  locationValue,
  parseTablet,
  type Location,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Cell, Condition, Mutation } from '../meta/types.js';
import { queueDemand, type PlannedJob } from '../queue/planner.js';
import { queueUpdate } from '../queue/entries.js';
import type { QueueResolver } from '../queue/resolver.js';
import type { CompactorWatch } from './compactor-watch.js';
import { HostedTablet } from './hosted-tablet.js';
import type { TableConfigs } from './table-configs.js';

/** A change to a tablet: the mutation's parts, and what to do to the in-memory copy once it is applied. */
export interface TabletChange {
  conditions?: Condition[];
  puts?: Cell[];
  deletes?: { row: string; col: string }[];
  deleteRows?: string[];
  /** Applied to the in-memory tablet after the store accepted the change. */
  apply?: (meta: TabletMeta) => void;
  /** Re-plan the tablet's queue entries as part of this change, as if `apply` had run. */
  replan?: boolean;
}

export interface HostingDeps {
  me: Location;
  meta: MetaClient;
  queues: QueueResolver;
  configs: TableConfigs;
  watch: CompactorWatch;
  log: Logger;
  /** Called when the manager rejects a mutation because our session is gone: the server must stop. */
  onFenced: (err: ExcError) => void;
  /** Called with the reservations of a loaded tablet whose compactor is already gone. */
  cancelOrphan: (tablet: HostedTablet, ecid: string) => Promise<void>;
}

export class Hosting {
  private readonly tablets = new Map<string, HostedTablet>();
  private readonly loading = new Map<string, Promise<void>>();

  constructor(private readonly deps: HostingDeps) {}

  get count(): number {
    return this.tablets.size;
  }

  all(): HostedTablet[] {
    return [...this.tablets.values()];
  }

  /** The hosted tablet, or NOT_SERVING naming where it is hosted now (when known). */
  async get(row: string): Promise<HostedTablet> {
    const tablet = this.tablets.get(row);
    if (tablet && tablet.state === 'hosted') return tablet;
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
    const { me, meta, log } = this.deps;
    const cols = await meta.row(row);
    if (cols.size === 0) throw new ExcError('NOT_FOUND', `no tablet ${row}`);
    const current = parseTablet(row, cols);
    const mine = locationValue(me);
    if (current.loc && locationValue(current.loc) === mine) {
      // Ours already (a load request repeated after we took it).
    } else if (current.future && locationValue(current.future) === mine && !current.loc) {
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
      if (!result?.applied)
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
    log.info(
      { tablet: row, files: current.files.size, reservations: current.reservations.size },
      'tablet loaded',
    );

    // Reservations made under the previous host: keep those whose compactor lives, cancel the others.
    for (const [ecid, r] of current.reservations) {
      const alive = await this.deps.watch.checkAndWatch(r.compactor).catch(() => true);
      if (alive) {
        this.deps.watch.add(r.compactor, { tablet: row, ecid });
      } else {
        log.info(
          { tablet: row, ecid, compactor: r.compactor },
          'reservation of a dead compactor found on load',
        );
        await this.deps
          .cancelOrphan(tablet, ecid)
          .catch((err: unknown) =>
            log.warn({ tablet: row, ecid, err: describeError(err) }, 'could not cancel orphaned reservation'),
          );
      }
    }
    await tablet.mutex.run(() => this.change(tablet, { replan: true }));
  }

  /** Stops hosting a tablet and gives up its location (when it is still ours). */
  async unload(row: string, reason: string): Promise<void> {
    const tablet = this.tablets.get(row);
    if (!tablet) return;
    await tablet.mutex.run(async () => {
      if (tablet.state === 'gone') return;
      this.drop(tablet, reason);
      await this.mutate([{ conditions: [tablet.locCondition()], deletes: [{ row, col: COL_LOC }] }]).catch(
        () => undefined,
      );
    });
  }

  /** Re-reads a tablet's row (user compactions, released failures written by the manager) and re-plans. */
  async refresh(row: string): Promise<void> {
    const tablet = this.tablets.get(row);
    if (!tablet) return;
    await tablet.mutex.run(async () => {
      if (tablet.state !== 'hosted') return;
      const fresh = parseTablet(row, await this.deps.meta.row(row));
      if (!fresh.loc || locationValue(fresh.loc) !== locationValue(this.deps.me)) {
        this.drop(tablet, 'location changed');
        return;
      }
      tablet.meta.userCompactions = fresh.userCompactions;
      tablet.meta.failures = fresh.failures;
      await this.change(tablet, { replan: true });
    });
  }

  /** Stops serving a tablet locally (it was lost or unloaded). */
  drop(tablet: HostedTablet, reason: string): void {
    if (tablet.state === 'gone') return;
    tablet.state = 'gone';
    this.tablets.delete(tablet.row);
    for (const [ecid, r] of tablet.meta.reservations) this.deps.watch.remove(r.compactor, ecid);
    this.deps.log.info({ tablet: tablet.row, reason }, 'tablet unloaded');
  }

  /**
   * Applies a change to a hosted tablet: call inside `tablet.mutex`. Adds the `loc` condition, and with
   * `replan` the queue-entry update computed from the tablet as it will be. Resolves true when applied,
   * false when one of the change's own conditions failed; a lost location drops the tablet and rejects
   * with NOT_SERVING.
   */
  async change(tablet: HostedTablet, change: TabletChange): Promise<boolean> {
    if (tablet.state !== 'hosted')
      throw new ExcError('NOT_SERVING', `tablet ${tablet.row} is not hosted here`, {
        details: { tablet: tablet.row },
      });
    const mutation: Mutation = {
      conditions: [tablet.locCondition(), ...(change.conditions ?? [])],
      puts: [...(change.puts ?? [])],
      deletes: [...(change.deletes ?? [])],
      deleteRows: [...(change.deleteRows ?? [])],
    };
    let queued: Map<string, string> | undefined;
    let finishedUser: string[] = [];
    if (change.replan) {
      // Plan on a copy with the change applied, so the queue says what the tablet will want.
      const preview = cloneMeta(tablet.meta);
      change.apply?.(preview);
      // A user compaction of a tablet without files has nothing to do: it is complete.
      if (preview.files.size === 0 && preview.userCompactions.size > 0) {
        finishedUser = [...preview.userCompactions.keys()];
        for (const id of finishedUser) {
          preview.userCompactions.delete(id);
          mutation.deletes!.push({ row: tablet.row, col: compactCol(id) });
        }
      }
      const jobs = await this.planFor(tablet, preview);
      const update = queueUpdate(tablet.meta, tablet.meta.queued, queueDemand(jobs), (name) =>
        this.deps.queues.byQueueName(name),
      );
      mutation.puts!.push(...update.puts);
      mutation.deletes!.push(...update.deletes);
      mutation.deleteRows!.push(...update.deleteRows);
      queued = update.queued;
    }
    if (mutation.puts!.length === 0 && mutation.deletes!.length === 0 && mutation.deleteRows!.length === 0) {
      return true;
    }
    const [result] = await this.mutate([mutation]);
    if (!result) throw new ExcError('INTERNAL', 'no result for a mutation');
    if (!result.applied) {
      if (result.failed.index === 0) {
        this.drop(tablet, 'lost its location (reassigned)');
        throw new ExcError('NOT_SERVING', `tablet ${tablet.row} is no longer hosted here`, {
          details: { tablet: tablet.row },
        });
      }
      return false;
    }
    change.apply?.(tablet.meta);
    for (const id of finishedUser) tablet.meta.userCompactions.delete(id);
    if (queued) tablet.meta.queued = queued;
    return true;
  }

  /** The jobs a tablet (in the given state) wants, with its table's current settings. */
  async planFor(tablet: HostedTablet, meta: TabletMeta = tablet.meta): Promise<PlannedJob[]> {
    const settings = await this.deps.configs.get(tablet.meta.tableId).catch(() => undefined);
    if (!settings || settings.state !== 'online') return [];
    const view = new HostedTablet(meta, tablet.me);
    return view.plan(settings.config);
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

function cloneMeta(meta: TabletMeta): TabletMeta {
  return {
    ...meta,
    files: new Map(meta.files),
    reservations: new Map(meta.reservations),
    userCompactions: new Map(meta.userCompactions),
    failures: new Map(meta.failures),
    progress: new Map(meta.progress),
    queued: new Map(meta.queued),
  };
}
