/**
 * What the admin API shows of compactions and compactors: running reservations, parked jobs and live
 * compactor nodes, assembled from a read of the tablets that have work (a catalog: tablet-activity.ts
 * knows which those are) and from ZooKeeper.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaBackend } from '../meta/backend.js';
import { failureKey, isParked, type TabletMeta } from '../meta/tablet.js';
import type { CompactorView, ParkedCompaction, RunningCompaction, TableInfo } from '../meta/views.js';
import type { QueueInfo } from '../queue/registry.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';
import { busyTablets, type ActivityIndex } from './tablet-activity.js';
import type { Tables } from './tables.js';

/** Where the views are read from. */
export interface ViewSources {
  store: MetaBackend;
  /** Which tablets have work (tablet-activity.ts). */
  activity: ActivityIndex;
  tables: Tables;
  session: ZkSession;
  layout: ZkLayout;
  log: Logger;
}

/**
 * The tablets with work — a reservation, a queue entry, a failure, a user compaction, a split job, a
 * selection — each as it is now: every tablet any compaction view or the queue metrics look at.
 */
export function workingTablets(p: ViewSources): Promise<TabletMeta[]> {
  return busyTablets(p.store, p.activity);
}

/** The tablets and tables the compaction listings are made from: read once per request. */
export interface Catalog {
  tablets: TabletMeta[];
  tables: Map<string, TableInfo>;
}

export async function readCatalog(p: ViewSources): Promise<Catalog> {
  const [tablets, tables] = await Promise.all([workingTablets(p), p.tables.list()]);
  return { tablets, tables: new Map(tables.map((t) => [t.id, t])) };
}

export function tableName(c: Catalog, tableId: string): string {
  return c.tables.get(tableId)?.name ?? tableId;
}

export function maxAttempts(c: Catalog, tableId: string): number {
  return c.tables.get(tableId)?.config.maxAttempts ?? 3;
}

export function runningCompactions(c: Catalog, queues: QueueInfo[]): RunningCompaction[] {
  const queueNames = new Map(queues.map((q) => [q.id, q.name]));
  const now = Date.now();
  const out: RunningCompaction[] = [];
  for (const t of c.tablets) {
    for (const [ecid, r] of t.reservations) {
      out.push({
        ecid,
        tablet: t.row,
        table: tableName(c, t.tableId),
        queueId: r.queueId,
        queue: queueNames.get(r.queueId) ?? null,
        compactor: r.compactor,
        kind: r.kind,
        attempt: r.attempt,
        inputs: r.inputs.length,
        // A sub-job reads its range only: about its share of the inputs.
        inputBytes: Math.round(
          r.inputs.reduce((sum, path) => sum + (t.files.get(path)?.size ?? 0), 0) / (r.split?.of ?? 1),
        ),
        ...(r.split ? { split: { id: r.split.id, index: r.split.index, of: r.split.of } } : {}),
        ...(r.checkpoint ? { checkpointBytes: r.checkpoint.bytes } : {}),
        reservedAt: r.reservedAt,
        ageMs: now - r.reservedAt,
        progress: t.progress.get(ecid) ?? null,
        server: t.loc?.server ?? null,
      });
    }
  }
  return out.sort((a, b) => a.reservedAt - b.reservedAt);
}

export function parkedCompactions(c: Catalog, queues: QueueInfo[]): ParkedCompaction[] {
  const queueNames = new Map(queues.map((q) => [q.id, q.name]));
  const out: ParkedCompaction[] = [];
  for (const t of c.tablets) {
    for (const [id, f] of t.failures) {
      if (!isParked(f, maxAttempts(c, t.tableId))) continue;
      out.push({
        id,
        tablet: t.row,
        table: tableName(c, t.tableId),
        queueId: f.queueId ?? null,
        queue: f.queueId ? (queueNames.get(f.queueId) ?? null) : null,
        attempts: f.attempts,
        lastError: f.lastError,
        lastEcid: f.lastEcid ?? null,
        inputs: f.inputs,
        at: f.at,
        userCompactionIds: parkedUserJob(t, id) ?? [],
      });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/** The user compactions whose job the failure `key` of tablet `t` is, or undefined for a system job. */
export function parkedUserJob(t: TabletMeta, key: string): string[] | undefined {
  return t.selection && failureKey(t.selection.files) === key ? t.selection.ids : undefined;
}

export async function compactorsOf(p: ViewSources, queue: QueueInfo): Promise<CompactorView[]> {
  const node = p.layout.queueNode(queue.id);
  const children = await p.session.children(node).catch((err: unknown) => {
    if (isZkCode(err, 'ZK_NO_NODE')) return [];
    throw err;
  });
  const views = await Promise.all(
    children.map(async (child) => {
      const path = `${node}/${child}`;
      try {
        const info = JSON.parse((await p.session.get(path)).data.toString('utf8')) as Record<string, unknown>;
        return {
          queue: queue.name,
          queueId: queue.id,
          path,
          host: typeof info.host === 'string' ? info.host : null,
          pid: typeof info.pid === 'number' ? info.pid : null,
          version: typeof info.version === 'string' ? info.version : null,
          started: typeof info.started === 'number' ? info.started : null,
          status: typeof info.status === 'string' ? info.status : null,
        };
      } catch (err) {
        p.log.debug({ path, err: describeError(err) }, 'compactor vanished while listing');
        return undefined;
      }
    }),
  );
  return views.filter((v): v is CompactorView => v !== undefined).sort((a, b) => (a.path < b.path ? -1 : 1));
}
