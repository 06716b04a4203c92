/**
 * One ZooKeeper session, done right once (see ZOOKEEPER-NOTES.md).
 *
 * - Promise API; every call has a timeout, because requests queued while disconnected never call back if
 *   the session then expires, and the client has no read timeout of its own.
 * - No automatic retries (`retries: 0`): a resent create after CONNECTION_LOSS leaks a node. Callers that
 *   need idempotent creation use {@link createProtected}.
 * - Session state is a small state machine with typed events:
 *   `connecting → connected ⇄ suspended → lost`, and `closed` after {@link ZkSession.close}.
 *   `lost` is final: the server has (or may have) expired the session and deleted its ephemeral nodes. The
 *   owner must build a new session and treat everything held under the old one as gone.
 * - A session is declared lost when the server says it expired, when it stays disconnected for a whole
 *   session timeout (the client only learns of expiry on reconnect), or when the watchdog's probe is not
 *   answered within two thirds of the timeout (a server that stopped answering without closing the TCP
 *   connection).
 */
import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import { ExcError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { withTimeout } from '../retry.js';
import { instanceAcl, openAcl, type ZkDigestAuth } from './acl.js';
import { fromZkError, isZkCode } from './errors.js';

const { CreateMode, Event, State } = zookeeper;

export type ZkSessionState = 'connecting' | 'connected' | 'suspended' | 'lost' | 'closed';
export type ZkLossReason = 'expired' | 'suspended-too-long' | 'watchdog' | 'auth-failed';

export type ZkCreateMode = 'persistent' | 'persistent-sequential' | 'ephemeral' | 'ephemeral-sequential';
const CREATE_MODES: Record<ZkCreateMode, number> = {
  persistent: CreateMode.PERSISTENT,
  'persistent-sequential': CreateMode.PERSISTENT_SEQUENTIAL,
  ephemeral: CreateMode.EPHEMERAL,
  'ephemeral-sequential': CreateMode.EPHEMERAL_SEQUENTIAL,
};

export type ZkEventType = 'created' | 'deleted' | 'dataChanged' | 'childrenChanged';
export interface ZkWatchEvent {
  type: ZkEventType;
  path: string;
}
/**
 * A watch handler. Watches are one-shot: re-arm inside the handler if needed. Pass the *same* function
 * each time for a given path (duplicates are recognised by identity only; fresh closures pile up).
 */
export type ZkWatcher = (event: ZkWatchEvent) => void;

export interface ZkStat {
  version: number;
  cversion: number;
  /** Session id (16 hex digits) of the owner of an ephemeral node; all zeros for a persistent node. */
  ephemeralOwner: string;
  numChildren: number;
  dataLength: number;
  ctimeMs: number;
  mtimeMs: number;
}

export type ZkOp =
  | { op: 'create'; path: string; data?: Buffer | string; mode?: ZkCreateMode }
  | { op: 'set'; path: string; data: Buffer | string; version: number }
  | { op: 'delete'; path: string; version: number }
  | { op: 'check'; path: string; version: number };

export interface ZkSessionOptions {
  /** `host:port[,host:port...]`. */
  connectString: string;
  /** Requested session timeout; the server clamps it, read {@link ZkSession.sessionTimeoutMs}. */
  sessionTimeoutMs: number;
  /** Digest credentials; nodes this session creates get the instance ACL. Without it, nodes are open. */
  auth?: ZkDigestAuth;
  /** Timeout of each call. Default: the negotiated session timeout. */
  requestTimeoutMs?: number;
  /** How long {@link ZkSession.connect} waits for the first connection. Default: 2 × session timeout. */
  connectTimeoutMs?: number;
  /** Run the watchdog (default true). */
  watchdog?: boolean;
  /** Delay between reconnection rounds (default 100 ms). */
  spinDelayMs?: number;
  logger?: Logger;
  /** Resume an existing session (tests use this to force expiry of another client's session). */
  resume?: { sessionId: Buffer; password: Buffer };
}

interface SessionEvents {
  connected: [];
  suspended: [];
  reconnected: [];
  lost: [ZkLossReason];
  closed: [];
}

type RawClient = zookeeper.Client & {
  connectionManager?: { socket?: { destroy(): void }; connect: () => void };
};

export class ZkSession extends EventEmitter<SessionEvents> {
  private readonly client: RawClient;
  private readonly acl: zookeeper.ACL[];
  private readonly log: Logger;
  private stateValue: ZkSessionState = 'connecting';
  private lossReason: ZkLossReason | undefined;
  private suspendTimer: NodeJS.Timeout | undefined;
  private watchdogTimer: NodeJS.Timeout | undefined;
  private probeInFlight = false;
  private readonly wrappedWatchers = new WeakMap<ZkWatcher, (event: zookeeper.Event) => void>();
  private readonly options: ZkSessionOptions;

  private constructor(options: ZkSessionOptions) {
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
   * Opens a session and resolves once it is connected. Rejects with UNAVAILABLE naming the connect string
   * if no server answers within `connectTimeoutMs`.
   */
  static async connect(options: ZkSessionOptions): Promise<ZkSession> {
    const session = new ZkSession(options);
    const connectTimeout = options.connectTimeoutMs ?? 2 * options.sessionTimeoutMs;
    try {
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          session.once('connected', resolve);
          session.once('lost', (reason) =>
            reject(new ExcError('ZK_SESSION_LOST', `zookeeper session lost while connecting: ${reason}`)),
          );
          session.client.connect();
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
      session.stateValue = 'closed';
      session.stopTimers();
      session.shutdownClient();
      throw err;
    }
    return session;
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

  // --- calls -------------------------------------------------------------------------------------------

  /** Creates a node; resolves with its path (with the sequence suffix for sequential modes). */
  create(path: string, data?: Buffer | string, mode: ZkCreateMode = 'persistent'): Promise<string> {
    return this.call('create', path, (cb: (e: unknown, p: string) => void) =>
      this.client.create(path, toBuffer(data) ?? Buffer.alloc(0), this.acl, CREATE_MODES[mode], cb),
    );
  }

  /** Creates `path` and any missing parents as persistent nodes; existing nodes are fine. */
  async ensurePath(path: string, data?: Buffer | string): Promise<void> {
    const parts = path.split('/').filter(Boolean);
    let current = '';
    for (const [i, part] of parts.entries()) {
      current += `/${part}`;
      try {
        await this.create(current, i === parts.length - 1 ? data : undefined);
      } catch (err) {
        if (!isZkCode(err, 'ZK_NODE_EXISTS')) throw err;
      }
    }
  }

  async get(path: string, watcher?: ZkWatcher): Promise<{ data: Buffer; stat: ZkStat }> {
    const [data, stat] = await this.call2<Buffer, zookeeper.Stat>('get', path, (cb) =>
      watcher ? this.client.getData(path, this.wrap(watcher), cb) : this.client.getData(path, cb),
    );
    return { data: data ?? Buffer.alloc(0), stat: toStat(stat) };
  }

  /** Sets data, conditional on `version` (-1 for any). Rejects ZK_BAD_VERSION when it does not match. */
  async set(path: string, data: Buffer | string, version = -1): Promise<ZkStat> {
    const stat = await this.call('set', path, (cb: (e: unknown, s: zookeeper.Stat) => void) =>
      this.client.setData(path, toBuffer(data) ?? null, version, cb),
    );
    return toStat(stat);
  }

  async delete(path: string, version = -1): Promise<void> {
    await this.call<void>('delete', path, (cb) => this.client.remove(path, version, (e) => cb(e, undefined)));
  }

  /**
   * The node's stat, or null when it does not exist. A watcher fires on creation (if absent) or on
   * deletion or data change (if present).
   */
  async exists(path: string, watcher?: ZkWatcher): Promise<ZkStat | null> {
    const stat = await this.call('exists', path, (cb: (e: unknown, s: zookeeper.Stat) => void) =>
      watcher ? this.client.exists(path, this.wrap(watcher), cb) : this.client.exists(path, cb),
    );
    return stat ? toStat(stat) : null;
  }

  async children(path: string, watcher?: ZkWatcher): Promise<string[]> {
    const [children] = await this.call2<string[], zookeeper.Stat>('children', path, (cb) =>
      watcher ? this.client.getChildren(path, this.wrap(watcher), cb) : this.client.getChildren(path, cb),
    );
    return children ?? [];
  }

  /**
   * Applies all ops atomically or none. On failure rejects with the failing op's code (ZK_BAD_VERSION,
   * ZK_NODE_EXISTS, ...) and `details.opIndex`. After ZK_CONNECTION_LOSS or ZK_TIMEOUT the outcome is
   * unknown: read back before deciding.
   */
  async multi(ops: ZkOp[]): Promise<void> {
    const tx = this.client.transaction() as zookeeper.Transaction & { ops: { version?: number }[] };
    for (const op of ops) {
      switch (op.op) {
        case 'create':
          tx.create(
            op.path,
            toBuffer(op.data) ?? Buffer.alloc(0),
            this.acl,
            CREATE_MODES[op.mode ?? 'persistent'],
          );
          break;
        case 'set':
          tx.setData(op.path, toBuffer(op.data) ?? null, op.version);
          break;
        case 'delete':
          tx.remove(op.path, op.version);
          break;
        case 'check':
          tx.check(op.path, op.version);
          break;
      }
      // The library turns version 0 into -1 ("any version"), which would silently drop the check.
      if ('version' in op && op.version === 0) tx.ops[tx.ops.length - 1]!.version = 0;
    }
    const label = ops.map((o) => `${o.op} ${o.path}`).join(', ');
    await this.guard(
      'multi',
      label,
      new Promise<void>((resolve, reject) => {
        tx.commit((err: unknown, results: unknown) => {
          if (!err) return resolve();
          const failed = firstFailedOp(results);
          const e = fromZkError(
            err,
            'multi',
            failed === undefined ? label : `${ops[failed]?.op} ${ops[failed]?.path}`,
          );
          if (failed !== undefined) e.details.opIndex = failed;
          reject(e);
        });
      }),
    );
  }

  /**
   * Ends the session. The server deletes its ephemeral nodes at once, which is what makes a graceful
   * release fast. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.stateValue === 'closed') return;
    const wasLive = this.isLive;
    this.stateValue = 'closed';
    this.stopTimers();
    if (wasLive) {
      // Wait until the server has processed closeSession and dropped the connection (so the ephemerals are
      // gone when close() returns), but never hang on a server that stopped answering.
      const done = new Promise<void>((resolve) => this.client.once('disconnected', () => resolve()));
      this.client.close();
      await withTimeout(done, Math.min(2_000, this.sessionTimeoutMs), () => new Error('close timeout')).catch(
        () => undefined,
      );
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
      const wasSuspended = this.stateValue === 'suspended';
      this.transition('connected');
      this.startWatchdog();
      this.emit(wasSuspended ? 'reconnected' : 'connected');
    } else if (state === State.DISCONNECTED) {
      if (this.stateValue !== 'connected') return;
      this.transition('suspended');
      this.stopWatchdog();
      // The client hears of expiry only when it reconnects. Assume the worst once a whole session timeout
      // has passed without a connection (Curator treats SUSPENDED this long as LOST).
      this.suspendTimer = setTimeout(() => this.declareLost('suspended-too-long'), this.sessionTimeoutMs);
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
    // Ask the server to end the session in case it is still alive (it frees our ephemerals sooner), then
    // drop the socket: a server that stopped answering would otherwise keep it, and the process, alive.
    try {
      this.client.close();
    } catch {
      // closing a dead client can throw; there is nothing left to release
    }
    setTimeout(() => this.shutdownClient(), 200).unref();
    this.emit('lost', reason);
  }

  private startWatchdog(): void {
    if (this.options.watchdog === false || this.watchdogTimer) return;
    const interval = Math.max(50, Math.floor(this.sessionTimeoutMs / 3));
    const probeTimeout = Math.max(100, Math.floor((this.sessionTimeoutMs * 2) / 3));
    this.watchdogTimer = setInterval(() => {
      if (this.stateValue !== 'connected' || this.probeInFlight) return;
      this.probeInFlight = true;
      const probe = new Promise<void>((resolve, reject) =>
        this.client.exists('/', (err) => (err ? reject(fromZkError(err, 'exists', '/')) : resolve())),
      );
      withTimeout(probe, probeTimeout)
        .catch((err: unknown) => {
          // Only silence counts: an answer, even an error, proves the server is there. A connection loss
          // moves us to `suspended`, which has its own timer.
          if (err instanceof ExcError && err.code === 'TIMEOUT' && this.stateValue === 'connected') {
            this.log.warn({ probeTimeoutMs: probeTimeout }, 'zookeeper watchdog: no answer');
            this.declareLost('watchdog');
          }
        })
        .finally(() => {
          this.probeInFlight = false;
        });
    }, interval);
    this.watchdogTimer.unref();
  }

  private stopWatchdog(): void {
    clearInterval(this.watchdogTimer);
    this.watchdogTimer = undefined;
  }

  private stopTimers(): void {
    this.stopWatchdog();
    clearTimeout(this.suspendTimer);
    this.suspendTimer = undefined;
  }

  /**
   * Stops the client for good. The library reconnects by itself whenever a socket closes outside its
   * CLOSING state (and a reconnection timer may already be pending), so disable reconnection before
   * dropping the socket; otherwise a dead session could keep dialling, and keep the process alive.
   */
  private shutdownClient(): void {
    const manager = this.client.connectionManager;
    if (!manager) return;
    manager.connect = () => undefined;
    try {
      manager.socket?.destroy();
    } catch {
      // already gone
    }
  }

  private lostError(): ExcError {
    return new ExcError(
      'ZK_SESSION_LOST',
      this.stateValue === 'closed'
        ? 'zookeeper session closed'
        : `zookeeper session lost (${this.lossReason ?? 'unknown'})`,
      { details: { reason: this.lossReason ?? this.stateValue } },
    );
  }

  private wrap(watcher: ZkWatcher): (event: zookeeper.Event) => void {
    let wrapped = this.wrappedWatchers.get(watcher);
    if (!wrapped) {
      wrapped = (event: zookeeper.Event) => {
        if (this.stateValue === 'closed') return;
        watcher({ type: eventType(event.getType()), path: event.getPath() });
      };
      this.wrappedWatchers.set(watcher, wrapped);
    }
    return wrapped;
  }

  private guard<T>(op: string, path: string, promise: Promise<T>): Promise<T> {
    const timeout = this.options.requestTimeoutMs ?? this.sessionTimeoutMs;
    return withTimeout(
      promise,
      timeout,
      () =>
        new ExcError('ZK_TIMEOUT', `zookeeper ${op} ${path}: no answer within ${timeout} ms`, {
          details: { path, op },
        }),
    );
  }

  private call<T>(
    op: string,
    path: string,
    invoke: (cb: (err: unknown, result: T) => void) => void,
  ): Promise<T> {
    if (!this.isLive && this.stateValue !== 'connecting') return Promise.reject(this.lostError());
    return this.guard(
      op,
      path,
      new Promise<T>((resolve, reject) => {
        try {
          invoke((err, result) => (err ? reject(fromZkError(err, op, path)) : resolve(result)));
        } catch (err) {
          // The client validates paths synchronously and throws.
          reject(
            new ExcError('BAD_REQUEST', `zookeeper ${op} ${path}: ${(err as Error).message}`, { cause: err }),
          );
        }
      }),
    );
  }

  private call2<A, B>(
    op: string,
    path: string,
    invoke: (cb: (err: unknown, a: A, b: B) => void) => void,
  ): Promise<[A, B]> {
    return this.call<[A, B]>(op, path, (cb) => invoke((err, a, b) => cb(err, [a, b])));
  }
}

function toBuffer(data: Buffer | string | undefined): Buffer | undefined {
  if (data === undefined) return undefined;
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

function longToNumber(buf: Buffer): number {
  return Number(buf.readBigInt64BE(0));
}

function toStat(stat: zookeeper.Stat): ZkStat {
  return {
    version: stat.version,
    cversion: stat.cversion,
    ephemeralOwner: stat.ephemeralOwner.toString('hex'),
    numChildren: stat.numChildren,
    dataLength: stat.dataLength,
    ctimeMs: longToNumber(stat.ctime),
    mtimeMs: longToNumber(stat.mtime),
  };
}

function eventType(type: number): ZkEventType {
  switch (type) {
    case Event.NODE_CREATED:
      return 'created';
    case Event.NODE_DELETED:
      return 'deleted';
    case Event.NODE_DATA_CHANGED:
      return 'dataChanged';
    default:
      return 'childrenChanged';
  }
}

/** Index of the op that made a multi fail; later ops report RUNTIME_INCONSISTENCY (-2), not the cause. */
function firstFailedOp(results: unknown): number | undefined {
  if (!Array.isArray(results)) return undefined;
  const index = results.findIndex(
    (r: { err?: number }) => typeof r?.err === 'number' && r.err !== 0 && r.err !== -2,
  );
  return index >= 0 ? index : undefined;
}
