/**
 * Cancelling reservations on the tablet server: the I/O around decideCancel (rules.ts). In the tablet's
 * mutex: read the tablet back if its copy is stale, gather what the rule needs (the table's maxAttempts,
 * whether the queue still exists, how many compactors it has for a failure), apply the change through
 * hosting, and keep the compactor watch, the progress clocks, the counters and the log in step. A cancel
 * whose outcome is unknown is read back: gone is what it wanted, whoever did it.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { FAILURE_REASONS } from '../meta/outcomes.js';
import { tableConfigSchema } from '../meta/table-config.js';
import type { CompactorWatch, ReservationRef } from './compactor-watch.js';
import type { HostedTablet } from './hosted-tablet.js';
import type { Hosting } from './hosting.js';
import { cancelHappened, decideCancel, ownedReservation, type CancelReason } from './rules.js';
import type { TableConfigs } from './table-configs.js';

export interface CancellationsDeps {
  hosting: Hosting;
  watch: CompactorWatch;
  configs: TableConfigs;
  /** Whether a queue's node still exists (a compactor that vanished with its queue did not fail). */
  queueExists: (queueId: string) => Promise<boolean>;
  /** Compactors registered in a queue now (a failure on the only one parks a job sooner: isParked). */
  queueCompactors?: (queueId: string) => Promise<number>;
  log: Logger;
  /** Told, for each reservation of a dead compactor cancelled, how long after `since` (its death) it was. */
  onReclaimed?: (seconds: number) => void;
  /** Told each reservation that ended here (committed or cancelled): tablets holding it act on it. */
  onEnded?: (ecid: string) => void;
}

/** Used when the table's settings cannot be read to decide whether a failed job is parked. */
const DEFAULT_MAX_ATTEMPTS = tableConfigSchema.parse({}).maxAttempts;

const isUnknown = (err: unknown): boolean => err instanceof ExcError && err.code === 'OUTCOME_UNKNOWN';

export class Cancellations {
  constructor(
    private readonly deps: CancellationsDeps,
    /** The reservations' counters (reservations.ts): cancels are counted there. */
    private readonly stats: { cancelled: number },
  ) {}

  /**
   * Cancels a reservation (if it still exists). Resolves whether this call removed it. With `compactor`
   * (a compactor failing or releasing its job), only that compactor's reservation: RESERVATION_GONE if it
   * is not.
   */
  async cancel(
    tabletRow: string,
    ecid: string,
    reason: CancelReason,
    options: { error?: string; compactor?: string } = {},
  ): Promise<boolean> {
    const tablet = await this.deps.hosting.get(tabletRow);
    return tablet.mutex.run(async () => {
      if (options.compactor !== undefined) {
        if (tablet.stale) await this.deps.hosting.resync(tablet);
        ownedReservation(tablet.meta, ecid, options.compactor);
      }
      return this.cancelLocked(tablet, ecid, reason, options.error);
    });
  }

  /** Cancels inside the tablet's mutex. */
  async cancelLocked(
    tablet: HostedTablet,
    ecid: string,
    reason: CancelReason,
    error?: string,
  ): Promise<boolean> {
    if (tablet.stale) await this.deps.hosting.resync(tablet);
    const r = tablet.meta.reservations.get(ecid);
    if (!r || tablet.state !== 'hosted') return false;
    const settings = await this.deps.configs.get(tablet.meta.tableId).catch(() => undefined);
    const queueCompactors = FAILURE_REASONS.has(reason)
      ? await this.deps.queueCompactors?.(r.queueId).catch(() => undefined)
      : undefined;
    const decision = decideCancel(tablet.meta, ecid, reason, {
      ...(queueCompactors === undefined ? {} : { queueCompactors }),
      now: Date.now(),
      server: tablet.me.server,
      ...(error === undefined ? {} : { error }),
      maxAttempts: settings?.config.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      queueExists: reason !== 'compactor-gone' || (await this.deps.queueExists(r.queueId).catch(() => true)),
    });
    if (decision.kind === 'none') return false;
    let applied: boolean;
    try {
      applied = await this.deps.hosting.change(tablet, { ...decision.change, replan: true });
    } catch (err) {
      if (isUnknown(err) && !tablet.stale && cancelHappened(tablet.meta, ecid)) applied = true;
      else throw err;
    }
    if (!applied) return false;
    // What its compactor had written when it ended (the work a cancel throws away), before it is forgotten.
    const written = tablet.reported.get(ecid)?.figures?.bytesWritten;
    this.deps.watch.remove(r.compactor, ecid);
    tablet.forgetProgress(ecid);
    this.deps.onEnded?.(ecid);
    this.stats.cancelled++;
    this.deps.log.info(
      {
        tablet: tablet.row,
        ecid,
        reason: decision.reason,
        compactor: r.compactor,
        attempts: decision.failure?.attempts,
        parked: decision.failure?.parked ?? false,
        keptCheckpoint: decision.keptCheckpoint,
        ...(written === undefined ? {} : { bytesWritten: written }),
      },
      'reservation cancelled',
    );
    return true;
  }

  /** A compactor's node disappeared: cancel all its reservations here (the reconciler retries failures). */
  onCompactorGone(refs: ReservationRef[], since?: number): void {
    for (const ref of refs) {
      this.cancel(ref.tablet, ref.ecid, 'compactor-gone').then(
        (cancelled) => {
          if (cancelled && since !== undefined) this.deps.onReclaimed?.((Date.now() - since) / 1000);
        },
        (err: unknown) =>
          this.deps.log.warn(
            { ...ref, err: describeError(err) },
            'could not cancel the reservation of a dead compactor yet',
          ),
      );
    }
  }
}
