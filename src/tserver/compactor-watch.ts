/**
 * Watching the compactors that hold reservations on this server's tablets.
 *
 * One watch per compactor node (not per reservation); when the node is deleted every reservation of that
 * compactor is reported at once. The watch is set by the same call that checks the compactor is alive at
 * reservation time (`getData` with a watcher: it registers nothing for a node that does not exist, so dead
 * compactors leave no watches behind), so there is no window in which a death goes unseen; a compactor that
 * dies before its reservation is recorded is remembered as dead and reported as soon as it is. A compactor
 * is declared dead only when its deletion is seen or proven: a node missing from a view that predates its
 * creation (a lagging ZooKeeper follower) proves nothing (see {@link absenceMeans}). `sweep`
 * re-checks a list of reservations — the reconciler passes every reservation of the hosted tablets — as the
 * backstop for a watch lost during a disconnection and for a cancellation that failed.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { isZkCode, type ZkSession, type ZkStat, type ZkWatchEvent } from '../zk/index.js';
import type { CompactorAddress } from './compactor-probe.js';

/**
 * What a compactor's node missing from this server's view proves, given its parent's (the queue node's)
 * stat read after the miss. ZooKeeper numbers an EPHEMERAL_SEQUENTIAL node with its parent's `cversion`
 * (the count of child creations and deletions) at its creation, and the creation raises `cversion` past
 * that number. A view whose parent `cversion` is at most the node's number predates its creation
 * (`not-seen-yet`: a follower that has not applied it). A higher one includes it (`check-again`: the node
 * existed by then, so a miss on a read after this one proves it was deleted). No parent: the queue, and
 * every node under it, is `gone`; so is a path without a sequence number (nothing to tell by).
 */
export function absenceMeans(
  compactor: string,
  parent: Pick<ZkStat, 'cversion'> | null,
): 'gone' | 'not-seen-yet' | 'check-again' {
  const seq = /-(\d{10})$/.exec(compactor)?.[1];
  if (seq === undefined || parent === null) return 'gone';
  return parent.cversion <= Number(seq) ? 'not-seen-yet' : 'check-again';
}

export interface ReservationRef {
  tablet: string;
  ecid: string;
}

export class CompactorWatch {
  /** compactor path → its reservations on this server. */
  private readonly holders = new Map<string, Map<string, ReservationRef>>();
  /** Compactors seen gone (kept briefly, to catch reservations recorded just after the death). */
  private readonly dead = new Map<string, number>();
  /** When each compactor's watch was last set by a successful check. */
  private readonly armedAt = new Map<string, number>();
  /** Where each live compactor said it can be reached (its node's data), for compactor-probe.ts. */
  private readonly addresses = new Map<string, CompactorAddress>();
  /** When the session last lost its connection: watches set before it are not trusted alone. */
  private lastSuspendedAt = 0;
  private readonly onSuspended = (): void => {
    this.lastSuspendedAt = Date.now();
  };

  constructor(
    private readonly session: ZkSession,
    private readonly onGone: (compactor: string, refs: ReservationRef[]) => void,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.session.on('suspended', this.onSuspended);
  }

  stop(): void {
    this.session.off('suspended', this.onSuspended);
  }

  /**
   * Checks that the compactor is alive and watches it. Resolves false when its node is gone; rejects with
   * UNAVAILABLE (retriable) when this server's view of ZooKeeper does not include the node's creation yet:
   * a compactor registered through another ZooKeeper server can ask here before this one's has applied
   * its create, and declaring it dead then would cancel its work and make it register again, over and
   * over while the lag lasts. See {@link absenceMeans}.
   */
  async checkAndWatch(compactor: string): Promise<boolean> {
    if (this.dead.has(compactor)) return false;
    const armed = Date.now();
    if (!(await this.getAndWatch(compactor))) {
      // Read after the miss, on the same session: at least as recent a view.
      const parent = await this.session.exists(compactor.slice(0, compactor.lastIndexOf('/')));
      const meaning = absenceMeans(compactor, parent);
      if (meaning === 'not-seen-yet') {
        throw new ExcError(
          'UNAVAILABLE',
          `compactor ${compactor} is not visible from this tablet server's ZooKeeper server yet; try again`,
          { details: { compactor } },
        );
      }
      // Created by now: a miss from here on means it was deleted.
      if (meaning === 'gone' || !(await this.getAndWatch(compactor))) {
        this.markDead(compactor);
        return false;
      }
    }
    this.armedAt.set(compactor, armed);
    return true;
  }

  /** Reads the node with the watch: false when it does not exist (then no watch is left behind). */
  private async getAndWatch(compactor: string): Promise<boolean> {
    try {
      const { data } = await this.session.get(compactor, this.watcher);
      const address = addressIn(data);
      if (address) this.addresses.set(compactor, address);
      return true;
    } catch (err) {
      if (!isZkCode(err, 'ZK_NO_NODE')) throw err;
      return false;
    }
  }

  /**
   * Whether the compactor is alive as far as its watch can tell, without asking ZooKeeper: its watch was
   * set by a successful check and the session has stayed connected since. ZooKeeper then delivers the
   * node's deletion before any later answer, so a compactor that died has already been reported (give or
   * take the notification's transit). Otherwise ask with {@link checkAndWatch}.
   */
  knownAlive(compactor: string): boolean {
    if (this.dead.has(compactor)) return false;
    const armed = this.armedAt.get(compactor);
    return armed !== undefined && armed > this.lastSuspendedAt && this.session.state === 'connected';
  }

  /** Records a reservation of a (checked) compactor. If it died meanwhile, it is reported at once. */
  add(compactor: string, ref: ReservationRef): void {
    let refs = this.holders.get(compactor);
    if (!refs) {
      refs = new Map();
      this.holders.set(compactor, refs);
    }
    refs.set(ref.ecid, ref);
    if (this.dead.has(compactor)) this.report(compactor);
  }

  remove(compactor: string, ecid: string): void {
    const refs = this.holders.get(compactor);
    refs?.delete(ecid);
    // The watch stays set in ZooKeeper until it fires, so `armedAt` stays too: the compactor's next
    // reservation needs no round trip.
    if (refs?.size === 0) this.holders.delete(compactor);
  }

  /** Where `compactor` said it can be reached, if it said so and is not known dead. */
  addressOf(compactor: string): CompactorAddress | undefined {
    return this.addresses.get(compactor);
  }

  /** Whether `compactor` holds reservations here. */
  holds(compactor: string): boolean {
    return (this.holders.get(compactor)?.size ?? 0) > 0;
  }

  /** Compactors with reservations here. */
  get watched(): string[] {
    return [...this.holders.keys()];
  }

  /** One stable handler for every compactor node (the client de-duplicates watches by identity). */
  private readonly watcher = (event: ZkWatchEvent): void => {
    if (event.type === 'deleted') {
      this.markDead(event.path);
      this.report(event.path);
      return;
    }
    // Data changed: the watch is spent; re-arm it while we still care.
    this.armedAt.delete(event.path);
    if (!this.holders.has(event.path)) {
      this.addresses.delete(event.path);
      return;
    }
    this.checkAndWatch(event.path).then(
      (alive) => {
        if (!alive) this.report(event.path);
      },
      (err: unknown) =>
        this.log.debug(
          { compactor: event.path, err: describeError(err) },
          'could not re-arm a compactor watch',
        ),
    );
  };

  /** When this server saw `compactor`'s node deleted (within the last minute). */
  diedAt(compactor: string): number | undefined {
    return this.dead.get(compactor);
  }

  private markDead(compactor: string): void {
    this.armedAt.delete(compactor);
    this.addresses.delete(compactor);
    this.dead.set(compactor, Date.now());
    // Forget deaths older than a minute: compactor paths are never reused (sequential nodes).
    for (const [path, at] of this.dead) if (Date.now() - at > 60_000) this.dead.delete(path);
  }

  private report(compactor: string): void {
    const refs = this.holders.get(compactor);
    if (!refs || refs.size === 0) return;
    this.holders.delete(compactor);
    // The ecids, so that grepping one compaction's ecid finds this line too.
    const ecids = [...refs.values()].map((r) => r.ecid);
    this.log.info(
      { compactor, reservations: refs.size, ecids },
      'compactor gone: cancelling its reservations',
    );
    this.onGone(compactor, [...refs.values()]);
  }

  /**
   * Re-checks the compactors of `reservations` that the watch cannot vouch for, records every reservation
   * (so a later death is reported), and reports the reservations of dead compactors — again on every sweep
   * until they are gone. A reservation that ended while the list was made or its compactor checked
   * (`isCurrent` says no) is left out: recorded again, it would stay until its compactor died.
   */
  async sweep(
    reservations: Iterable<[compactor: string, ref: ReservationRef]>,
    isCurrent: (ref: ReservationRef) => boolean,
  ): Promise<void> {
    const byCompactor = new Map<string, ReservationRef[]>();
    for (const [compactor, ref] of reservations)
      byCompactor.set(compactor, [...(byCompactor.get(compactor) ?? []), ref]);
    for (const [compactor, listed] of byCompactor) {
      try {
        const alive = this.knownAlive(compactor) || (await this.checkAndWatch(compactor));
        const refs = listed.filter(isCurrent);
        if (alive) {
          for (const ref of refs) this.add(compactor, ref);
          continue;
        }
        if (refs.length === 0) continue;
        this.log.info(
          { compactor, reservations: refs.length, ecids: refs.map((r) => r.ecid) },
          'sweep: compactor gone',
        );
        for (const ref of refs) this.remove(compactor, ref.ecid);
        this.onGone(compactor, refs);
      } catch (err) {
        this.log.debug({ compactor, err: describeError(err) }, 'compactor sweep check failed');
      }
    }
  }
}

/** The address in a compactor node's data (registration.ts, CompactorInfo); undefined when it has none. */
function addressIn(data: Buffer): CompactorAddress | undefined {
  try {
    const info = JSON.parse(data.toString('utf8')) as { status?: unknown; host?: unknown } | null;
    if (typeof info?.status === 'string' && typeof info.host === 'string')
      return { status: info.status, host: info.host };
  } catch {
    // Not ours to judge: the node exists, which is all the watch needs.
  }
  return undefined;
}
