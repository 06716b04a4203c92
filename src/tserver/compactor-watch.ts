/**
 * Watching the compactors that hold reservations on this server's tablets.
 *
 * One exists-watch per compactor node (not per reservation); when the node is deleted every reservation of
 * that compactor is cancelled at once. The watch is set by the same `exists` call that checks the
 * compactor is alive at reservation time, so there is no window in which a death goes unseen; a compactor
 * that dies before its reservation is recorded is remembered as dead and its reservation cancelled as soon
 * as it is. A periodic sweep re-checks every watched compactor, as the backstop for a watch lost during a
 * disconnection (ZooKeeper cannot report a create-and-delete that happened meanwhile).
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ZkSession, ZkWatchEvent } from '../zk/index.js';

export interface ReservationRef {
  tablet: string;
  ecid: string;
}

export class CompactorWatch {
  /** compactor path → its reservations on this server. */
  private readonly holders = new Map<string, Map<string, ReservationRef>>();
  /** Compactors seen gone (kept briefly, to catch reservations recorded just after the death). */
  private readonly dead = new Map<string, number>();
  /** When each compactor's watch was last set by a successful `exists`. */
  private readonly armedAt = new Map<string, number>();
  /** When the session last lost its connection: watches set before it are not trusted alone. */
  private lastSuspendedAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly session: ZkSession,
    private readonly onGone: (compactor: string, refs: ReservationRef[]) => void,
    private readonly log: Logger,
    private readonly sweepEveryMs = 5_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.sweepEveryMs);
    this.timer.unref();
    this.session.on('suspended', () => {
      this.lastSuspendedAt = Date.now();
    });
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Checks that the compactor is alive and watches it. Resolves false when its node does not exist.
   */
  async checkAndWatch(compactor: string): Promise<boolean> {
    if (this.dead.has(compactor)) return false;
    const armed = Date.now();
    const stat = await this.session.exists(compactor, this.watcher);
    if (!stat) {
      this.markDead(compactor);
      return false;
    }
    this.armedAt.set(compactor, armed);
    return true;
  }

  /**
   * Whether the compactor is alive as far as its watch can tell, without asking ZooKeeper: its watch was
   * set by a successful `exists` and the session has stayed connected since. ZooKeeper then delivers the
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

  /** Compactors with reservations here. */
  get watched(): string[] {
    return [...this.holders.keys()];
  }

  /** One stable handler for every compactor node (the client de-duplicates watches by identity). */
  private readonly watcher = (event: ZkWatchEvent): void => {
    if (event.type === 'deleted') {
      this.markDead(event.path);
      this.report(event.path);
    } else {
      // Data changed or created: the watch is spent; re-arm it while we still care.
      this.armedAt.delete(event.path);
      if (!this.holders.has(event.path)) return;
      void this.checkAndWatch(event.path).then((alive) => {
        if (!alive) this.report(event.path);
      });
    }
  };

  private markDead(compactor: string): void {
    this.armedAt.delete(compactor);
    this.dead.set(compactor, Date.now());
    // Forget deaths older than a minute: compactor paths are never reused (sequential nodes).
    for (const [path, at] of this.dead) if (Date.now() - at > 60_000) this.dead.delete(path);
  }

  private report(compactor: string): void {
    const refs = this.holders.get(compactor);
    if (!refs || refs.size === 0) return;
    this.holders.delete(compactor);
    this.log.info({ compactor, reservations: refs.size }, 'compactor gone: cancelling its reservations');
    this.onGone(compactor, [...refs.values()]);
  }

  /** Re-checks every watched compactor (and re-arms its watch). */
  async sweep(): Promise<void> {
    for (const compactor of this.watched) {
      try {
        if (!(await this.checkAndWatch(compactor))) this.report(compactor);
      } catch (err) {
        this.log.debug({ compactor, err: describeError(err) }, 'compactor sweep check failed');
      }
    }
  }
}
