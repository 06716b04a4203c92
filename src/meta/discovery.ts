/**
 * Finding the active manager: the ephemeral node /excompact/manager holds its address.
 *
 * {@link ManagerWatch} follows that node with a watch, so a client learns of a failover when ZooKeeper
 * does — not when a call to the old manager fails, or times out. Each manager it sees (one node, told
 * apart from the next by the session that owns it: a manager restarted at the same address is another
 * manager) comes with an AbortSignal that fires the moment the node is deleted or replaced. Calls in
 * flight to a manager that died or was paused are abandoned then and sent to the new one: a paused
 * process keeps its connections open, and a call to it would otherwise wait out its whole timeout.
 */
import { setMaxListeners } from 'node:events';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { sleep } from '../retry.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';

export interface ManagerAddress {
  host: string;
  port: number;
  pid: number;
  since: number;
}

/** The active manager's address, or undefined when none is active. */
export async function readManagerAddress(
  session: ZkSession,
  layout: ZkLayout,
): Promise<ManagerAddress | undefined> {
  try {
    const { data } = await session.get(layout.manager);
    return JSON.parse(data.toString('utf8')) as ManagerAddress;
  } catch (err) {
    if (isZkCode(err, 'ZK_NO_NODE')) return undefined;
    throw err;
  }
}

/** One active manager, as seen in its node. */
export interface ManagerTarget {
  url: string;
  /** The session that owns the node. */
  owner: string;
  /** Aborted once this manager no longer holds the node. */
  signal: AbortSignal;
}

export class ManagerWatch {
  private target: (ManagerTarget & { aborter: AbortController }) | undefined;
  /** Whether `target` comes from a read of the node (a failed read leaves it unknown). */
  private known = false;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private readonly waiters = new Set<() => void>();
  private closed = false;
  /** One stable watcher for the node: the client recognises duplicates by identity only. */
  private readonly onNodeEvent = (): void => {
    this.refresh().catch((err: unknown) =>
      this.log.debug({ err: describeError(err) }, 'could not read the manager node'),
    );
  };
  /** A watch set while disconnected may be missing: read again after every reconnection. */
  private readonly onReconnected = (): void => this.onNodeEvent();

  constructor(
    /** The session it follows the node on. */
    readonly session: ZkSession,
    private readonly layout: ZkLayout,
    private readonly log: Logger,
  ) {
    session.on('reconnected', this.onReconnected);
  }

  /** The active manager as last seen (read now when nothing is known), or undefined when there is none. */
  async current(): Promise<ManagerTarget | undefined> {
    if (!this.known) await this.refresh();
    return this.target;
  }

  /**
   * Reads the node again and re-arms the watch. Calls while a read is under way share it and cause one
   * more read after it, so nothing that happened meanwhile is missed.
   */
  refresh(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.reading) {
      this.readAgain = true;
      return this.reading;
    }
    this.reading = (async () => {
      try {
        do {
          this.readAgain = false;
          await this.read();
        } while (this.readAgain && !this.closed);
      } catch (err) {
        this.known = false; // the watch may not be armed: the next current() reads again
        throw err;
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  /** Resolves when the manager changes, after `ms`, or when `signal` aborts — whichever comes first. */
  changed(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Stops following the node (the session itself is the caller's). */
  close(): void {
    this.closed = true;
    this.session.off('reconnected', this.onReconnected);
    this.switchTo(undefined);
  }

  private async read(): Promise<void> {
    // exists() arms the watch whether or not the node is there: it fires on create, delete and change.
    const stat = await this.session.exists(this.layout.manager, this.onNodeEvent);
    let next: { url: string; owner: string } | undefined;
    if (stat) {
      try {
        const { data, stat: now } = await this.session.get(this.layout.manager);
        const address = JSON.parse(data.toString('utf8')) as ManagerAddress;
        next = { url: `http://${address.host}:${address.port}`, owner: now.ephemeralOwner };
      } catch (err) {
        // Deleted between the two reads: the watch fires for that, and the next read sees it.
        if (!isZkCode(err, 'ZK_NO_NODE')) throw err;
      }
    }
    this.known = true;
    this.switchTo(next);
  }

  private switchTo(next: { url: string; owner: string } | undefined): void {
    const previous = this.target;
    if (previous?.owner === next?.owner && previous?.url === next?.url) return;
    if (previous) {
      previous.aborter.abort(
        // The reason a call gets when it is aborted before it was sent; one aborted after gets a
        // transport error saying it was sent.
        new ExcError('NOT_MANAGER', `${previous.url} is no longer the active manager`, {
          details: { url: previous.url, sent: false },
        }),
      );
    }
    const aborter = new AbortController();
    // Every call in flight to this manager listens to its signal: many at once is normal, not a leak.
    setMaxListeners(0, aborter.signal);
    this.target = next ? { ...next, aborter, signal: aborter.signal } : undefined;
    if (!this.closed) {
      this.log.info(
        { from: previous?.url ?? null, to: next?.url ?? null },
        next ? 'active manager changed' : 'no active manager',
      );
    }
    for (const wake of [...this.waiters]) wake();
  }
}

/** A fixed manager (a `url` given instead of ZooKeeper): it never changes. */
export function fixedManager(url: string): ManagerTarget {
  return { url, owner: url, signal: new AbortController().signal };
}

/** Waits for `ms` or until `watch` reports a change (no watch: just the wait). */
export function waitForChange(
  watch: ManagerWatch | undefined,
  ms: number,
  signal?: AbortSignal,
): Promise<void> {
  return watch ? watch.changed(ms, signal) : sleep(ms, signal).catch(() => undefined);
}
