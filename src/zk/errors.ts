import zookeeper from 'node-zookeeper-client';
import { ExcError, type ErrorCode } from '../errors.js';

const { Exception } = zookeeper;

const CODE_MAP = new Map<number, ErrorCode>([
  [Exception.CONNECTION_LOSS, 'ZK_CONNECTION_LOSS'],
  [Exception.OPERATION_TIMEOUT, 'ZK_TIMEOUT'],
  [Exception.SESSION_EXPIRED, 'ZK_SESSION_LOST'],
  [Exception.AUTH_FAILED, 'ZK_SESSION_LOST'],
  [Exception.NO_NODE, 'ZK_NO_NODE'],
  [Exception.NODE_EXISTS, 'ZK_NODE_EXISTS'],
  [Exception.BAD_VERSION, 'ZK_BAD_VERSION'],
  [Exception.NOT_EMPTY, 'ZK_NOT_EMPTY'],
  [Exception.NO_AUTH, 'ZK_NO_AUTH'],
]);

/** Turns a node-zookeeper-client exception (or anything else it throws) into an ExcError naming the call. */
export function fromZkError(err: unknown, op: string, path: string): ExcError {
  if (err instanceof ExcError) return err;
  const zkCode = (err as { code?: unknown } | null)?.code;
  const code = typeof zkCode === 'number' ? (CODE_MAP.get(zkCode) ?? 'ZK_ERROR') : 'ZK_ERROR';
  const name = (err as { name?: unknown } | null)?.name;
  return new ExcError(code, `zookeeper ${op} ${path}: ${typeof name === 'string' ? name : String(err)}`, {
    cause: err,
    details: { path, op },
  });
}

/** True when `err` is the ZooKeeper answer `code` (an answer, not a failure: NODE_EXISTS, NO_NODE, ...). */
export function isZkCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof ExcError && err.code === code;
}
