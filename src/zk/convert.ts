/**
 * Conversions between the client library's shapes and the layer's own (see types.ts).
 */
import zookeeper from 'node-zookeeper-client';
import type { ZkCreateMode, ZkEventType, ZkOp, ZkStat } from './types.js';

const { CreateMode, Event } = zookeeper;

export const CREATE_MODES: Record<ZkCreateMode, number> = {
  persistent: CreateMode.PERSISTENT,
  'persistent-sequential': CreateMode.PERSISTENT_SEQUENTIAL,
  ephemeral: CreateMode.EPHEMERAL,
  'ephemeral-sequential': CreateMode.EPHEMERAL_SEQUENTIAL,
};

export function toBuffer(data: Buffer | string | undefined): Buffer | undefined {
  if (data === undefined) return undefined;
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

function longToNumber(buf: Buffer): number {
  return Number(buf.readBigInt64BE(0));
}

export function toStat(stat: zookeeper.Stat): ZkStat {
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

export function eventType(type: number): ZkEventType {
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
export function firstFailedOp(results: unknown): number | undefined {
  if (!Array.isArray(results)) return undefined;
  const index = results.findIndex(
    (r: { err?: number }) => typeof r?.err === 'number' && r.err !== 0 && r.err !== -2,
  );
  return index >= 0 ? index : undefined;
}

/** A multi's operations added to the client's transaction. */
export function transactionOf(
  transaction: zookeeper.Transaction,
  ops: readonly ZkOp[],
  acl: zookeeper.ACL[],
): zookeeper.Transaction {
  const tx = transaction as zookeeper.Transaction & { ops: { version?: number }[] };
  for (const op of ops) {
    switch (op.op) {
      case 'create':
        tx.create(op.path, toBuffer(op.data) ?? Buffer.alloc(0), acl, CREATE_MODES[op.mode ?? 'persistent']);
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
  return tx;
}

/**
 * ZooKeeper's request limit (jute.maxbuffer, 1 MiB less one byte by default), less room for headers. A
 * request over it is not refused with an error: the server drops the connection.
 */
export const MAX_MULTI_BYTES = 1_000_000;

/** About what a multi takes on the wire: each operation's header, path, data and ACL. */
export function multiBytes(ops: readonly ZkOp[]): number {
  let bytes = 0;
  for (const op of ops) {
    bytes += 24 + Buffer.byteLength(op.path);
    if (op.op === 'create' || op.op === 'set') bytes += toBuffer(op.data)?.length ?? 0;
    if (op.op === 'create') bytes += 64; // the ACL
  }
  return bytes;
}

/** A multi as error messages name it: its first operations and how many more. */
export function multiLabel(ops: readonly ZkOp[]): string {
  const shown = ops.slice(0, 3).map((o) => `${o.op} ${o.path}`);
  if (ops.length > shown.length) shown.push(`… ${ops.length - shown.length} more`);
  return shown.join(', ');
}
