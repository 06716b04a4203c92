/**
 * Compaction queues as ZooKeeper records them (DESIGN.md, "ZooKeeper layout"):
 *   /excompact/queues             JSON map name → id
 *   /excompact/compactors/<id>    JSON settings ({ "bins": N }); its children are the live compactors
 *
 * Creating and deleting a queue changes both in one version-checked multi, retried on version conflicts,
 * so two admins racing on one name end with exactly one queue.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { ID_LENGTH, MAX_BINS, QUEUE_ID_RE, formatId } from '../meta/keys.js';
import { checkEntityName } from '../names.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';

export const DEFAULT_BINS = 8;

const queueMapSchema = z.record(z.string(), z.string().regex(QUEUE_ID_RE));
const queueSettingsSchema = z.object({ bins: z.number().int().min(1).max(MAX_BINS) });
export type QueueSettings = z.infer<typeof queueSettingsSchema>;

export interface QueueInfo {
  name: string;
  id: string;
  bins: number;
}

/**
 * The name → id map and its version (for a version-checked update). A `Map`, never the parsed object:
 * looking a name up in a plain object finds inherited properties (`constructor`, `toString`), which once
 * made such names "exist" as queues.
 */
export async function readQueueMap(
  session: ZkSession,
  layout: ZkLayout,
  watcher?: Parameters<ZkSession['get']>[1],
): Promise<{ map: Map<string, string>; version: number }> {
  const { data, stat } = await session.get(layout.queues, watcher);
  const parsed = queueMapSchema.safeParse(JSON.parse(data.toString('utf8') || '{}'));
  if (!parsed.success) throw new ExcError('INTERNAL', `${layout.queues} holds a malformed queue map`);
  return { map: new Map(Object.entries(parsed.data)), version: stat.version };
}

/** The map as stored in ZooKeeper: a JSON object of own properties. */
function queueMapJson(map: ReadonlyMap<string, string>): string {
  return JSON.stringify(Object.fromEntries(map));
}

export async function readQueueSettings(
  session: ZkSession,
  layout: ZkLayout,
  id: string,
): Promise<QueueSettings> {
  const { data } = await session.get(layout.queueNode(id));
  const parsed = queueSettingsSchema.safeParse(JSON.parse(data.toString('utf8') || '{}'));
  if (!parsed.success) throw new ExcError('INTERNAL', `${layout.queueNode(id)} holds malformed settings`);
  return parsed.data;
}

/** Throws UNKNOWN_QUEUE naming every one of `names` that is not a queue. */
export async function checkQueuesExist(session: ZkSession, layout: ZkLayout, names: string[]): Promise<void> {
  if (names.length === 0) return;
  const { map } = await readQueueMap(session, layout);
  const missing = names.filter((n) => !map.has(n));
  if (missing.length > 0) {
    throw new ExcError(
      'UNKNOWN_QUEUE',
      `no queue named ${missing.map((n) => JSON.stringify(n)).join(', ')}`,
      {
        details: { queue: missing },
      },
    );
  }
}

/** Resolves a queue name, or throws BAD_REQUEST (not a queue name) or UNKNOWN_QUEUE naming it. */
export async function resolveQueue(session: ZkSession, layout: ZkLayout, name: string): Promise<QueueInfo> {
  checkEntityName('queue', name);
  const { map } = await readQueueMap(session, layout);
  const id = map.get(name);
  if (!id)
    throw new ExcError('UNKNOWN_QUEUE', `no queue named ${JSON.stringify(name)}`, {
      details: { queue: name },
    });
  const { bins } = await readQueueSettings(session, layout, id);
  return { name, id, bins };
}

export async function listQueues(session: ZkSession, layout: ZkLayout): Promise<QueueInfo[]> {
  const { map } = await readQueueMap(session, layout);
  const out: QueueInfo[] = [];
  for (const [name, id] of [...map].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const settings = await readQueueSettings(session, layout, id).catch(() => ({ bins: 0 }));
    out.push({ name, id, bins: settings.bins });
  }
  return out;
}

/**
 * Creates a queue: allocates a short id never used before and, in one multi, adds name → id to the map
 * (checking the map's version) and creates the queue node. Retries on version conflicts; a name that exists
 * by then is ALREADY_EXISTS — unless it was created by this same request (`requestId`, kept in the node's
 * data): a request repeated after its answer was lost gets the queue it created.
 *
 * The id is the map's next version (every create and delete sets the map, so versions only grow): a queue
 * deleted and another created never share an id, which tablet servers, `~cq` rows and reservations name
 * queues by. It wraps only after 36^4 changes of the map; an id still in the map or left as a node (ids
 * were random before) is skipped.
 */
export async function createQueue(
  session: ZkSession,
  layout: ZkLayout,
  name: string,
  bins = DEFAULT_BINS,
  log?: Logger,
  requestId?: string,
): Promise<QueueInfo> {
  checkEntityName('queue', name, 'body.name');
  if (!Number.isInteger(bins) || bins < 1 || bins > MAX_BINS)
    throw new ExcError('BAD_REQUEST', `--bins must be 1..${MAX_BINS}, not ${bins}`);
  let skip = 0; // ids found taken by a leftover node
  for (let attempt = 0; attempt < 50; attempt++) {
    const { map, version } = await readQueueMap(session, layout);
    const existing = map.get(name);
    if (existing) {
      if (requestId !== undefined && (await createdBy(session, layout, existing)) === requestId) {
        return { name, id: existing, ...(await readQueueSettings(session, layout, existing)) };
      }
      throw new ExcError('ALREADY_EXISTS', `queue ${JSON.stringify(name)} already exists (id ${existing})`);
    }
    const id = nextQueueId(version + 1 + skip, new Set(map.values()));
    try {
      await session.multi([
        { op: 'set', path: layout.queues, data: queueMapJson(new Map(map).set(name, id)), version },
        { op: 'create', path: layout.queueNode(id), data: JSON.stringify({ bins, requestId }) },
      ]);
      log?.info({ queue: name, queueId: id, bins }, 'queue created');
      return { name, id, bins };
    } catch (err) {
      // Someone else changed the map: read again and retry. A leftover node holds the id: skip it.
      if (isZkCode(err, 'ZK_BAD_VERSION')) continue;
      if (isZkCode(err, 'ZK_NODE_EXISTS')) {
        skip++;
        continue;
      }
      throw err;
    }
  }
  throw new ExcError('CONFLICT', `could not create queue ${name}: too many concurrent changes`);
}

/**
 * Compactor nodes deleted in the same multi as the queue's name. ZooKeeper refuses a request over its
 * 1 MiB packet limit (jute.maxbuffer) by dropping the connection, and a compactor's delete takes about
 * 100 bytes of it: a queue with more compactors than this is deleted in steps (below).
 */
export const ONE_MULTI_MAX_COMPACTORS = 2_000;

/**
 * Deletes a queue's name and node. Its compactors see their node go and, finding the queue gone, exit.
 *
 * Up to {@link ONE_MULTI_MAX_COMPACTORS} compactors, one multi does it all: the name, every compactor's
 * node (a node with children cannot be deleted) and the queue's node. With more, the multi removes the
 * name only, and {@link removeQueueNode} then deletes the compactors' nodes and the queue's: from the
 * name's removal on, tablet servers and compactors that look the queue up find it gone, so a compactor
 * whose node is deleted exits instead of registering again.
 */
export async function deleteQueue(
  session: ZkSession,
  layout: ZkLayout,
  name: string,
  log?: Logger,
): Promise<QueueInfo> {
  checkEntityName('queue', name);
  for (let attempt = 0; attempt < 50; attempt++) {
    const { map, version } = await readQueueMap(session, layout);
    const id = map.get(name);
    if (!id)
      throw new ExcError('UNKNOWN_QUEUE', `no queue named ${JSON.stringify(name)}`, {
        details: { queue: name },
      });
    const settings = await readQueueSettings(session, layout, id).catch(() => ({ bins: 0 }));
    const children = await childrenOf(session, layout.queueNode(id));
    const rest = new Map(map);
    rest.delete(name);
    const inOne = children.length <= ONE_MULTI_MAX_COMPACTORS;
    try {
      await session.multi([
        { op: 'set', path: layout.queues, data: queueMapJson(rest), version },
        ...(inOne
          ? [
              ...children.map((c) => ({
                op: 'delete' as const,
                path: `${layout.queueNode(id)}/${c}`,
                version: -1,
              })),
              { op: 'delete' as const, path: layout.queueNode(id), version: -1 },
            ]
          : []),
      ]);
    } catch (err) {
      // The map changed, or a compactor joined or left between listing and deleting: try again.
      if (isZkCode(err, 'ZK_BAD_VERSION') || isZkCode(err, 'ZK_NOT_EMPTY') || isZkCode(err, 'ZK_NO_NODE'))
        continue;
      throw err;
    }
    if (!inOne) await removeQueueNode(session, layout, id);
    log?.info({ queue: name, queueId: id, compactors: children.length }, 'queue deleted');
    return { name, id, bins: settings.bins };
  }
  throw new ExcError('CONFLICT', `could not delete queue ${name}: too many concurrent changes`);
}

/**
 * Deletes the node of a queue whose name is already gone, with its compactors' nodes, a hundred at a time.
 * Idempotent: what is already gone is fine, so a deletion cut short (the manager died) is finished by
 * calling it again. A compactor that registered between the listing and the queue node's delete (it read
 * the name before it went) is found by the next listing.
 */
export async function removeQueueNode(session: ZkSession, layout: ZkLayout, id: string): Promise<void> {
  const node = layout.queueNode(id);
  for (let attempt = 0; attempt < 50; attempt++) {
    const children = await childrenOf(session, node);
    for (let i = 0; i < children.length; i += 100) {
      await Promise.all(
        children.slice(i, i + 100).map((c) => ignoreNoNode(session.delete(`${node}/${c}`, -1))),
      );
    }
    try {
      await ignoreNoNode(session.delete(node, -1));
      return;
    } catch (err) {
      if (!isZkCode(err, 'ZK_NOT_EMPTY')) throw err;
    }
  }
  throw new ExcError('CONFLICT', `could not delete queue node ${node}: compactors keep registering`);
}

async function childrenOf(session: ZkSession, node: string): Promise<string[]> {
  return session.children(node).catch((err: unknown) => {
    if (isZkCode(err, 'ZK_NO_NODE')) return [];
    throw err;
  });
}

async function ignoreNoNode(op: Promise<unknown>): Promise<void> {
  try {
    await op;
  } catch (err) {
    if (!isZkCode(err, 'ZK_NO_NODE')) throw err;
  }
}

/** The request that created a queue's node, if it recorded one. */
async function createdBy(session: ZkSession, layout: ZkLayout, id: string): Promise<string | undefined> {
  const { data } = await session.get(layout.queueNode(id));
  const parsed = z
    .object({ requestId: z.string().optional() })
    .safeParse(JSON.parse(data.toString('utf8') || '{}'));
  return parsed.success ? parsed.data.requestId : undefined;
}

/** The first id from counter value `from` on (wrapping) that is not in `used`. */
export function nextQueueId(from: number, used: ReadonlySet<string>): string {
  const space = 36 ** ID_LENGTH;
  for (let n = from; n < from + space; n++) {
    const id = formatId(n % space);
    if (!used.has(id)) return id;
  }
  throw new ExcError('CONFLICT', 'every queue id is in use');
}
