/**
 * Sub-second reclaim of a crashed compactor's work (DESIGN.md, "Liveness").
 *
 * A compactor that holds (or is about to ask for) reservations on this tablet server keeps one long-lived
 * request open to it: its link. A process that dies — kill -9, a crash, an OOM kill — has its TCP
 * connections closed by the kernel at once, so the link's end is the earliest sign of its death, long
 * before its ZooKeeper session expires. When a compactor's last link closes and it still holds
 * reservations here, and it has not linked again within a short grace (a compactor that is alive
 * re-links at once), this server fences it: it deletes the compactor's ephemeral node with the instance
 * digest. The deletion goes through the normal path — every tablet server watching the node cancels the
 * compactor's reservations, and any later commit from it is refused — and a compactor that was in fact
 * alive sees its node gone, abandons its jobs and registers again.
 *
 * What this does not see: a host that dies or a network that drops packets closes no connection; a
 * paused process keeps its connections open. Those still wait for the session timeout, as a paused
 * process must (it is not dead; after a pause past its session its commits are refused).
 *
 * A fence outlives the session it was decided on: when this server's session ends with fences unfinished
 * (ZooKeeper without a quorum fails the delete, and this server's own session may go with it), or with a
 * closed link still in its grace, the next session's links take them over ({@link unfinished},
 * {@link takeOver}) and finish them once it is up; otherwise the dead compactor's work would wait for its
 * session to expire, a full session timeout after ZooKeeper has a leader again.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { isZkCode } from '../zk/index.js';

export interface CompactorLinksDeps {
  /** Whether the compactor holds reservations on this server's tablets. */
  holds: (compactor: string) => boolean;
  /** Deletes the compactor's node (ZooKeeper, with the instance digest). */
  deleteNode: (compactor: string) => Promise<void>;
  /** How long a closed link may stay closed before the compactor is fenced (0: never fence). */
  graceMs: number;
  log: Logger;
}

/** After a failed delete of a compactor's node, the next try. */
const FENCE_RETRY_MS = 500;
/** How long a fence taken over from an earlier session is tried (its compactor holds nothing here yet). */
const TAKEN_OVER_FOR_MS = 60_000;

/** A fence this server's session did not finish: the compactor, and when its link closed (if it did). */
export interface UnfinishedFence {
  compactor: string;
  linkClosedAt?: number;
}

export class CompactorLinks {
  /** Open links per compactor. */
  private readonly open = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Compactors whose node this server is deleting now (or will again, after a failed try). */
  private readonly fencing = new Set<string>();
  private readonly ending = new Set<() => void>();
  private stopped = false;
  /** Compactors fenced because their link closed (for /status and the metrics). */
  fenced = 0;
  /** When each compactor's last link closed (not by this server), until it links again. */
  private readonly closedAt = new Map<string, number>();
  /** Fences taken over from the session before, until when they are tried without a reservation here. */
  private readonly takenOver = new Map<string, number>();

  constructor(private readonly deps: CompactorLinksDeps) {}

  /**
   * Holds a link from `compactor` until `signal` aborts (the connection closed) or the server stops.
   * Resolves `true` when the server stopped it (the compactor should link again, wherever its tablets
   * went), `false` when the connection closed.
   */
  hold(compactor: string, signal: AbortSignal): Promise<boolean> {
    this.open.set(compactor, (this.open.get(compactor) ?? 0) + 1);
    this.closedAt.delete(compactor);
    // Linked again: alive after all, whatever was about to fence it (the grace, a failed delete's retry).
    clearTimeout(this.timers.get(compactor));
    this.timers.delete(compactor);
    this.fencing.delete(compactor);
    this.takenOver.delete(compactor);
    return new Promise<boolean>((resolve) => {
      const end = (byServer: boolean): void => {
        signal.removeEventListener('abort', onAbort);
        this.ending.delete(onStop);
        const left = (this.open.get(compactor) ?? 1) - 1;
        if (left > 0) this.open.set(compactor, left);
        else {
          this.open.delete(compactor);
          if (!byServer) {
            this.closedAt.set(compactor, Date.now());
            this.closed(compactor);
          }
        }
        resolve(byServer);
      };
      const onAbort = (): void => end(false);
      const onStop = (): void => end(true);
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.ending.add(onStop);
    });
  }

  /**
   * When `compactor`'s link closed, if it is closed now: for a crashed compactor, the moment it died
   * (excompact_reclaim_seconds counts from there). Forgotten after a minute, like the watch's deaths.
   */
  linkClosedAt(compactor: string): number | undefined {
    const now = Date.now();
    for (const [path, at] of this.closedAt) if (now - at > 60_000) this.closedAt.delete(path);
    return this.closedAt.get(compactor);
  }

  /**
   * A reservation of `compactor` was just recorded. If its link had closed before (it died while the
   * reservation was being made, so the link's end found it holding nothing here and fenced nothing), the
   * grace starts now, as if the link closed now: otherwise its work waited for its session to expire.
   */
  reserved(compactor: string): void {
    if (this.open.has(compactor) || this.timers.has(compactor)) return;
    if (this.linkClosedAt(compactor) === undefined) return;
    this.closed(compactor);
  }

  /**
   * The fences not finished when this server stops or its session ends: the nodes being deleted (or to be
   * tried again), and the compactors whose closed link was still in its grace. For the next session.
   */
  unfinished(): UnfinishedFence[] {
    const compactors = new Set([...this.fencing, ...this.timers.keys()]);
    return [...compactors].map((compactor) => {
      const at = this.closedAt.get(compactor);
      return at === undefined ? { compactor } : { compactor, linkClosedAt: at };
    });
  }

  /**
   * Takes over the fences an earlier session of this server left unfinished: each compactor is fenced
   * after the grace unless it links here first (it was alive after all), and tried again while the delete
   * fails, for up to a minute, although it holds nothing here until its tablets are loaded again.
   */
  takeOver(fences: readonly UnfinishedFence[]): void {
    if (this.deps.graceMs <= 0) return;
    for (const { compactor, linkClosedAt } of fences) {
      if (this.open.has(compactor) || this.timers.has(compactor)) continue;
      if (linkClosedAt !== undefined) this.closedAt.set(compactor, linkClosedAt);
      this.takenOver.set(compactor, Date.now() + TAKEN_OVER_FOR_MS);
      this.closed(compactor, "this server's session before could not finish fencing it");
    }
  }

  /** Whether this server should still fence `compactor`: it holds work here, or its fence was taken over. */
  private owed(compactor: string): boolean {
    if (this.deps.holds(compactor)) return true;
    const until = this.takenOver.get(compactor);
    if (until !== undefined && until < Date.now()) this.takenOver.delete(compactor);
    return (this.takenOver.get(compactor) ?? 0) >= Date.now();
  }

  /** Whether `compactor` has a link open here. */
  linked(compactor: string): boolean {
    return this.open.has(compactor);
  }

  private closed(compactor: string, why = 'its link closed while it held reservations'): void {
    const { graceMs } = this.deps;
    if (graceMs <= 0 || !this.owed(compactor)) return;
    const timer = setTimeout(() => {
      this.timers.delete(compactor);
      if (this.open.has(compactor) || !this.owed(compactor)) return;
      this.fence(compactor, why);
    }, graceMs);
    timer.unref();
    this.timers.set(compactor, timer);
  }

  /**
   * The compactors that hold reservations here with no link open and no fencing pending: for
   * compactor-probe.ts to ask (none while fencing is off).
   */
  unlinked(holders: string[]): string[] {
    if (this.deps.graceMs <= 0) return [];
    return holders.filter(
      (c) => !this.open.has(c) && !this.timers.has(c) && !this.fencing.has(c) && this.deps.holds(c),
    );
  }

  /** Deletes the compactor's node: every server watching it cancels its reservations (`why`: logged). */
  fence(compactor: string, why: string): void {
    this.fenced++;
    this.deps.log.info(
      { compactor, why },
      'compactor gone by what this server sees: fencing it (deleting its node)',
    );
    this.deleteNode(compactor);
  }

  /**
   * Deletes the node, and again every FENCE_RETRY_MS while it fails and the compactor still holds
   * reservations here without a link: ZooKeeper without a quorum (its leader killed twice in a row) fails
   * the delete, and the compactor's session then ends only a session timeout after a new leader is
   * elected, for the leader restarts every session's count.
   */
  private deleteNode(compactor: string): void {
    this.fencing.add(compactor);
    this.deps.deleteNode(compactor).then(
      () => {
        this.fencing.delete(compactor);
        this.takenOver.delete(compactor);
      },
      (err: unknown) => {
        this.fencing.delete(compactor);
        if (isZkCode(err, 'ZK_NO_NODE')) {
          this.takenOver.delete(compactor);
          return; // gone already: its session ended too
        }
        // Unless the server stopped meanwhile: then the next session takes this fence over (`unfinished`).
        const again = !this.stopped && !this.open.has(compactor) && this.owed(compactor);
        this.deps.log.warn(
          { compactor, err: describeError(err), again },
          again ? 'could not fence a compactor; trying again' : 'could not fence a compactor',
        );
        if (!again) return;
        this.fencing.add(compactor);
        const timer = setTimeout(() => {
          this.timers.delete(compactor);
          this.fencing.delete(compactor);
          if (!this.stopped && !this.open.has(compactor) && this.owed(compactor)) this.deleteNode(compactor);
        }, FENCE_RETRY_MS);
        timer.unref();
        this.timers.set(compactor, timer);
      },
    );
  }

  /** Ends every link (the server is stopping): compactors link again to wherever their tablets go. */
  close(): void {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const stop of [...this.ending]) stop();
  }
}
