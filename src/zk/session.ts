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
 * - A session is declared lost when the server says it expired, or when no server has answered for a whole
 *   session timeout (the client only learns of expiry on reconnect). A server that stops answering
 *   without closing the connection is found by the watchdog (watchdog.ts), which drops the connection so
 *   the client moves to another server of the ensemble with the same session: a paused or partitioned
 *   server, or a leader election, costs a reconnection, not the session. A session declared lost that way
 *   may still be alive on the server (an election restarts its timer): it is ended there as soon as a
 *   server answers (reaper.ts), so its ephemeral nodes do not outlive it by another timeout.
 */
import type zookeeper from 'node-zookeeper-client';
import { ExcError, describeError } from '../errors.js';
import { withTimeout } from '../retry.js';
import { ZkConnection } from './connection.js';
import {
  eventType,
  firstFailedOp,
  multiBytes,
  multiLabel,
  toBuffer,
  toStat,
  transactionOf,
  CREATE_MODES,
  MAX_MULTI_BYTES,
} from './convert.js';
import { fromZkError, isZkCode } from './errors.js';
import type { ZkCreateMode, ZkOp, ZkSessionOptions, ZkStat, ZkWatcher } from './types.js';

export type * from './types.js';

export class ZkSession extends ZkConnection {
  private readonly wrappedWatchers = new WeakMap<ZkWatcher, (event: zookeeper.Event) => void>();

  /**
   * Opens a session and resolves once it is connected. Rejects with UNAVAILABLE naming the connect string
   * if no server answers within `connectTimeoutMs`.
   */
  static async connect(options: ZkSessionOptions): Promise<ZkSession> {
    const session = new ZkSession(options);
    await session.open();
    return session;
  }

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

  /**
   * Whether `path` carries exactly the ACL this session gives the nodes it creates (the instance's
   * digest user with every right, or the world's for an instance without a secret).
   */
  async hasOwnAcl(path: string): Promise<boolean> {
    const [acls] = await this.call2<zookeeper.ACL[], zookeeper.Stat>('getACL', path, (cb) =>
      this.client.getACL(path, cb),
    );
    // The client's objects carry `permission` (its typings say `perms`).
    const key = (a: zookeeper.ACL): string => {
      const { permission, perms } = a as unknown as { permission?: number; perms?: number };
      return `${permission ?? perms}/${a.id.scheme}/${a.id.id}`;
    };
    const have = new Set(acls.map(key));
    return have.size === this.acl.length && this.acl.every((a) => have.has(key(a)));
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
    const label = multiLabel(ops);
    const bytes = multiBytes(ops);
    if (bytes > MAX_MULTI_BYTES)
      throw new ExcError(
        'BAD_REQUEST',
        `zookeeper multi of ${ops.length} operations (about ${bytes} bytes) exceeds the server's request limit (${MAX_MULTI_BYTES} bytes): ${label}`,
      );
    if (!this.isLive && this.stateValue !== 'connecting') throw this.lostError();
    const tx = transactionOf(this.client.transaction(), ops, this.acl);
    const commit = (): Promise<void> =>
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
      });
    // Not queued while disconnected, for the reason given in call().
    await this.guard(
      'multi',
      label,
      this.stateValue === 'suspended' ? this.whenConnected().then(commit) : commit(),
    );
  }

  private wrap(watcher: ZkWatcher): (event: zookeeper.Event) => void {
    let wrapped = this.wrappedWatchers.get(watcher);
    if (!wrapped) {
      wrapped = (event: zookeeper.Event) => {
        if (this.stateValue === 'closed') return;
        // The client calls watchers from its socket's data handler: a throw there would end the process
        // and starve the other watchers of the same event.
        try {
          watcher({ type: eventType(event.getType()), path: event.getPath() });
        } catch (err) {
          this.log.error({ err: describeError(err), path: event.getPath() }, 'a zookeeper watcher threw');
        }
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
    const send = (): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        try {
          invoke((err, result) => (err ? reject(fromZkError(err, op, path)) : resolve(result)));
        } catch (err) {
          // The client validates paths synchronously and throws.
          reject(
            new ExcError('BAD_REQUEST', `zookeeper ${op} ${path}: ${(err as Error).message}`, { cause: err }),
          );
        }
      });
    // While disconnected, wait for the connection before sending: the client would queue the request ahead
    // of the credentials it sends again on reconnecting, and the server would answer it NO_AUTH.
    return this.guard(op, path, this.stateValue === 'suspended' ? this.whenConnected().then(send) : send());
  }

  private call2<A, B>(
    op: string,
    path: string,
    invoke: (cb: (err: unknown, a: A, b: B) => void) => void,
  ): Promise<[A, B]> {
    return this.call<[A, B]>(op, path, (cb) => invoke((err, a, b) => cb(err, [a, b])));
  }
}
