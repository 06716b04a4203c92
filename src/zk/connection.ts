/**
 * The life of one ZooKeeper session (the base of {@link ZkSession}, which adds the calls): connecting,
 * its states and events, the watchdog, loss and close. See session.ts for what it guarantees.
 */
import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import { ExcError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { withTimeout } from '../retry.js';
import { instanceAcl, openAcl } from './acl.js';
import { fromZkError } from './errors.js';
import { endLostSession, stopClient, type RawClient } from './reaper.js';
import type { ZkLossReason, ZkSessionOptions, ZkSessionState } from './types.js';
import { Watchdog } from './watchdog.js';

const { State } = zookeeper;

interface SessionEvents {
  connected: [];
  suspended: [];
  reconnected: [];
  lost: [ZkLossReason];
  closed: [];
}

export class ZkConnection extends EventEmitter<SessionEvents> {
  protected readonly client: RawClient;
  protected readonly acl: zookeeper.ACL[];
  protected readonly log: Logger;
  protected stateValue: ZkSessionState = 'connecting';
  private lossReason: ZkLossReason | undefined;
  private suspendTimer: NodeJS.Timeout | undefined;
  private watchdog: Watchdog | undefined;
  /** When a server last answered us: a session outlives that by at most its timeout. */
  private lastHeardAt = 0;
  protected readonly options: ZkSessionOptions;

  protected constructor(options: ZkSessionOptions) {
    super();
    this.options = options;
    this.log = (options.logger ?? silentLogger()).child({ component: 'zk' });
    this.acl = options.auth ? instanceAcl(options.auth) : openAcl();
    // sessionId/sessionPassword are supported by the client but missing from its type definitions.
    const clientOptions: Partial<zookeeper.Option> & { sessionId?: Buffer; sessionPassword?: Buffer } = {
      sessionTimeout: options.sessionTimeoutMs,
      spinDelay: options.spinDelayMs ?? 100,
      retries: 0,
      ...(options.resume
        ? { sessionId: options.resume.sessionId, sessionPassword: options.resume.password }
        : {}),
    };
    this.client = zookeeper.createClient(options.connectString, clientOptions);
    if (options.auth) {
      // Registered before connecting: the client re-sends credentials on every (re)connection.
      this.client.addAuthInfo('digest', Buffer.from(`${options.auth.user}:${options.auth.password}`));
    }
    this.client.on('state', (state) => this.onClientState(state));
  }

  /**
   * Connects and resolves once connected. Rejects with UNAVAILABLE naming the connect string if no
   * server answers within `connectTimeoutMs`.
   */
  protected async open(): Promise<void> {
    const { options } = this;
    const connectTimeout = options.connectTimeoutMs ?? 2 * options.sessionTimeoutMs;
    try {
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          this.once('connected', resolve);
          this.once('lost', (reason) =>
            reject(new ExcError('ZK_SESSION_LOST', `zookeeper session lost while connecting: ${reason}`)),
          );
          this.client.connect();
        }),
        connectTimeout,
        () =>
          new ExcError(
            'UNAVAILABLE',
            `cannot reach ZooKeeper at ${options.connectString} within ${connectTimeout} ms`,
            { details: { zk: options.connectString } },
          ),
      );
    } catch (err) {
      this.stateValue = 'closed';
      this.stopTimers();
      this.shutdownClient();
      throw err;
    }
  }

  get state(): ZkSessionState {
    return this.stateValue;
  }

  /** Why the session was lost, once it is. */
  get lostBecause(): ZkLossReason | undefined {
    return this.lossReason;
  }

  /** Session id as 16 hex digits, the form used in `ephemeralOwner` and as a fencing token. */
  get sessionId(): string {
    return this.client.getSessionId().toString('hex');
  }

  get sessionPassword(): Buffer {
    return this.client.getSessionPassword();
  }

  /** The timeout the server granted. */
  get sessionTimeoutMs(): number {
    return this.client.getSessionTimeout();
  }

  get isLive(): boolean {
    return this.stateValue === 'connected' || this.stateValue === 'suspended';
  }

  /** Resolves when connected; rejects as soon as the session is lost or closed. */
  whenConnected(): Promise<void> {
    if (this.stateValue === 'connected') return Promise.resolve();
    if (!this.isLive && this.stateValue !== 'connecting') return Promise.reject(this.lostError());
    return new Promise((resolve, reject) => {
      const onConnected = (): void => {
        cleanup();
        resolve();
      };
      const onEnd = (): void => {
        cleanup();
        reject(this.lostError());
      };
      const cleanup = (): void => {
        this.off('connected', onConnected);
        this.off('reconnected', onConnected);
        this.off('lost', onEnd);
        this.off('closed', onEnd);
      };
      this.on('connected', onConnected);
      this.on('reconnected', onConnected);
      this.on('lost', onEnd);
      this.on('closed', onEnd);
    });
  }

  /**
   * Ends the session. The server deletes its ephemeral nodes at once, which is what makes a graceful
   * release fast. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.stateValue === 'closed') return;
    const wasLive = this.isLive;
    const wasSuspended = this.stateValue === 'suspended';
    this.stateValue = 'closed';
    this.stopTimers();
    if (wasLive) {
      // Wait until the server has processed closeSession and dropped the connection (so the ephemerals are
      // gone when close() returns), but never hang on a server that stopped answering.
      const done = new Promise<void>((resolve) => this.client.once('disconnected', () => resolve()));
      this.client.close();
      const closed = await withTimeout(
        done,
        Math.min(2_000, this.sessionTimeoutMs),
        () => new Error('close timeout'),
      )
        .then(() => !wasSuspended)
        .catch(() => false);
      // The close may never have reached a server (none was connected, or it did not answer): then the
      // session and its ephemeral nodes would outlive this for a whole timeout once the ensemble is back.
      // End it as soon as a server answers, in the background (reaper.ts), as for a session declared lost.
      if (!closed) this.reap();
    }
    this.shutdownClient();
    this.log.info({ session: this.sessionId }, 'zookeeper session closed');
    this.emit('closed');
  }

  // --- internals ---------------------------------------------------------------------------------------

  private onClientState(state: zookeeper.State): void {
    if (this.stateValue === 'closed' || this.stateValue === 'lost') return;
    if (state === State.SYNC_CONNECTED || state === State.CONNECTED_READ_ONLY) {
      clearTimeout(this.suspendTimer);
      this.suspendTimer = undefined;
      this.lastHeardAt = Date.now();
      const wasSuspended = this.stateValue === 'suspended';
      this.transition('connected');
      this.startWatchdog();
      this.emit(wasSuspended ? 'reconnected' : 'connected');
    } else if (state === State.DISCONNECTED) {
      if (this.stateValue !== 'connected') return;
      this.transition('suspended');
      this.watchdog?.stop();
      // The client hears of expiry only when it reconnects. The server expires the session a timeout after
      // it last heard from us, so assume the worst a timeout after we last heard from it (Curator treats
      // SUSPENDED this long as LOST). Meanwhile the client tries the ensemble's other servers.
      const remaining = Math.max(0, this.sessionTimeoutMs - (Date.now() - this.lastHeardAt));
      this.suspendTimer = setTimeout(() => this.declareLost('suspended-too-long'), remaining);
      this.emit('suspended');
    } else if (state === State.EXPIRED) {
      this.declareLost('expired');
    } else if (state === State.AUTH_FAILED) {
      this.declareLost('auth-failed');
    }
  }

  private transition(next: ZkSessionState): void {
    if (this.stateValue === next) return;
    this.log.info({ from: this.stateValue, to: next, session: this.sessionId }, 'zookeeper session state');
    this.stateValue = next;
  }

  private declareLost(reason: ZkLossReason): void {
    if (this.stateValue === 'lost' || this.stateValue === 'closed') return;
    this.lossReason = reason;
    this.log.warn({ reason, session: this.sessionId }, 'zookeeper session lost');
    this.transition('lost');
    this.stopTimers();
    // Drop the socket: a server that stopped answering would otherwise keep it, and the process, alive.
    // The close only reaches a server that is still connected, which is rare here.
    try {
      this.client.close();
    } catch {
      // closing a dead client can throw; there is nothing left to release
    }
    setTimeout(() => this.shutdownClient(), 200).unref();
    // We only assume the server expired it: a leader election restarts every session's timer. Make sure
    // it is over, in the background (reaper.ts).
    if (reason === 'suspended-too-long') this.reap();
    this.emit('lost', reason);
  }

  private reap(): void {
    endLostSession({
      connectString: this.options.connectString,
      sessionId: this.client.getSessionId(),
      password: this.client.getSessionPassword(),
      sessionTimeoutMs: this.sessionTimeoutMs,
      log: this.log,
    });
  }

  private startWatchdog(): void {
    if (this.options.watchdog === false) return;
    this.watchdog ??= new Watchdog({
      sessionTimeoutMs: this.sessionTimeoutMs,
      probe: () =>
        new Promise<void>((resolve, reject) =>
          this.client.exists('/', (err) => (err ? reject(fromZkError(err, 'exists', '/')) : resolve())),
        ),
      onHeard: () => {
        this.lastHeardAt = Date.now();
      },
      onSilent: (probeTimeoutMs) => {
        if (this.stateValue !== 'connected') return;
        // The server stopped answering but the connection looks open (a paused or overloaded server, a
        // network dropping packets). Drop it: the client then tries the other servers of the ensemble
        // with the same session, which survives if one takes it back before the timeout.
        this.log.warn({ probeTimeoutMs }, 'zookeeper watchdog: no answer; trying another server');
        this.client.connectionManager?.socket?.destroy();
      },
    });
    this.watchdog.start();
  }

  private stopTimers(): void {
    this.watchdog?.stop();
    clearTimeout(this.suspendTimer);
    this.suspendTimer = undefined;
  }

  private shutdownClient(): void {
    stopClient(this.client);
  }

  protected lostError(): ExcError {
    return new ExcError(
      'ZK_SESSION_LOST',
      this.stateValue === 'closed'
        ? 'zookeeper session closed'
        : `zookeeper session lost (${this.lossReason ?? 'unknown'})`,
      { details: { reason: this.lossReason ?? this.stateValue } },
    );
  }
}
