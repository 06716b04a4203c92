/**
 * The types of the ZooKeeper layer's API (see session.ts): session states, create modes, watch events,
 * stats, multi operations and session options.
 */
import type { Logger } from '../log.js';
import type { ZkDigestAuth } from './acl.js';

export type ZkSessionState = 'connecting' | 'connected' | 'suspended' | 'lost' | 'closed';
export type ZkLossReason = 'expired' | 'suspended-too-long' | 'auth-failed';

export type ZkCreateMode = 'persistent' | 'persistent-sequential' | 'ephemeral' | 'ephemeral-sequential';

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
