/**
 * The manager's operator API: queues (create, list, info, delete), compactors, compactions (list, cancel,
 * release parked jobs), user compactions of tables and the consistency check. This is what
 * `excompact admin` talks to.
 */
import { ulid } from '../ids.js';
import { z } from 'zod';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import {
  ALL_TABLETS,
  MAX_BINS,
  parseQueueRow,
  prefixEnd,
  queueEntryTablet,
  queuePrefix,
} from '../meta/keys.js';
import type { MetaStore } from '../meta/store.js';
import { compactCol, failedCol, isParked, type TabletMeta } from '../meta/tablet.js';
import type { CompactorView, ParkedCompaction, RunningCompaction, TableInfo } from '../meta/views.js';
import { createQueue, deleteQueue, listQueues, resolveQueue, type QueueInfo } from '../queue/registry.js';
import type { PeerClients } from '../rpc/peers.js';
import type { RpcServer } from '../rpc/server.js';
import { validateFilters } from '../storage/index.js';
import { parseInput } from '../validate.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';
import { runCheck } from './check-read.js';
import type { CommitQueue } from './commit-queue.js';
import type { GcObjectStore } from './gc.js';
import { readTablets, type Tables } from './tables.js';

export interface AdminParts {
  store: MetaStore;
  commits: CommitQueue;
  tables: Tables;
  session: ZkSession;
  layout: ZkLayout;
  peers: PeerClients;
  log: Logger;
  notifyTservers: (what: { tableId?: string; tablet?: string }) => void;
  /** The object store the garbage collector works on (undefined: none configured), and its grace. */
  objects: GcObjectStore | undefined;
  gcGraceMs: number;
}

const nameParam = z.object({ name: z.string().min(1) });

export function registerAdminApi(server: RpcServer, parts: () => AdminParts): void {
  server.route(
    'POST',
    '/queues',
    { body: z.object({ name: z.string(), bins: z.number().int().min(1).max(MAX_BINS).default(8) }) },
    async ({ body }) => {
      const p = parts();
      return createQueue(p.session, p.layout, body.name, body.bins, p.log);
    },
  );

  server.route('GET', '/queues', {}, async () => {
    const p = parts();
    const queues = await listQueues(p.session, p.layout);
    const running = runningCompactions(readCatalog(p), queues);
    return {
      queues: await Promise.all(
        queues.map(async (q) => ({
          ...q,
          queued: p.store.count(queuePrefix(q.id), prefixEnd(queuePrefix(q.id))!),
          running: running.filter((r) => r.queueId === q.id).length,
          compactors: (await compactorsOf(p, q)).length,
        })),
      ),
    };
  });

  server.route('GET', '/queues/:name', {}, async ({ params }) => {
    const p = parts();
    const { name } = parseInput(nameParam, params, 'path');
    const queue = await resolveQueue(p.session, p.layout, name);
    const catalog = readCatalog(p);
    const queued = [];
    for (const c of p.store.scanAll({ prefix: queuePrefix(queue.id) })) {
      const e = parseQueueRow(c.row);
      const since = (JSON.parse(c.value) as { at?: number }).at ?? null;
      queued.push({
        tablet: queueEntryTablet(e),
        table: tableName(catalog, e.tableId),
        priority: e.priority,
        bin: e.bin,
        since,
      });
    }
    queued.sort((a, b) => b.priority - a.priority);
    const queues = [queue];
    return {
      queue,
      queued,
      running: runningCompactions(catalog, queues).filter((r) => r.queueId === queue.id),
      parked: parkedCompactions(catalog, queues).filter((r) => r.queueId === queue.id),
      compactors: await compactorsOf(p, queue),
    };
  });

  server.route(
    'DELETE',
    '/queues/:name',
    { query: z.object({ force: z.enum(['true', 'false']).optional() }) },
    async ({ params, query }) => {
      const p = parts();
      const { name } = parseInput(nameParam, params, 'path');
      const queue = await resolveQueue(p.session, p.layout, name);
      const routing = p.tables.routingTo(name);
      if (routing.length > 0 && query.force !== 'true') {
        throw new ExcError(
          'CONFLICT',
          `queue ${name} is used by table${routing.length > 1 ? 's' : ''} ${routing.map((t) => t.name).join(', ')}; change their queue routes first or use --force`,
          { details: { tables: routing.map((t) => t.name) } },
        );
      }
      // Deleting the node (with its compactor children) makes the compactors exit and the tablet servers
      // cancel the queue's reservations; then the queue's entries go.
      await deleteQueue(p.session, p.layout, name, p.log);
      const rows = [...p.store.scanRows({ prefix: queuePrefix(queue.id) })].map((r) => r.row);
      for (let i = 0; i < rows.length; i += 1_000) {
        await p.commits.submit({ mutations: [{ deleteRows: rows.slice(i, i + 1_000) }] });
      }
      for (const t of routing) p.notifyTservers({ tableId: t.id });
      return { deleted: queue, entriesRemoved: rows.length, tablesStillRouting: routing.map((t) => t.name) };
    },
  );

  server.route(
    'GET',
    '/compactors',
    { query: z.object({ queue: z.string().optional() }) },
    async ({ query }) => {
      const p = parts();
      const queues = query.queue
        ? [await resolveQueue(p.session, p.layout, query.queue)]
        : await listQueues(p.session, p.layout);
      return { compactors: (await Promise.all(queues.map((q) => compactorsOf(p, q)))).flat() };
    },
  );

  server.route(
    'GET',
    '/compactions',
    {
      query: z.object({
        queue: z.string().optional(),
        table: z.string().optional(),
        state: z.enum(['running', 'parked']).optional(),
      }),
    },
    async ({ query }) => {
      const p = parts();
      let queues = await listQueues(p.session, p.layout);
      if (query.queue) queues = [await resolveQueue(p.session, p.layout, query.queue)];
      if (query.table) p.tables.get(query.table); // UNKNOWN_TABLE for a bad name
      const catalog = readCatalog(p);
      const keep = (c: { queueId: string | null; table: string }) =>
        (!query.queue || c.queueId === queues[0]!.id) && (!query.table || c.table === query.table);
      return {
        running: query.state === 'parked' ? [] : runningCompactions(catalog, queues).filter(keep),
        parked: query.state === 'running' ? [] : parkedCompactions(catalog, queues).filter(keep),
      };
    },
  );

  server.route('POST', '/compactions/:ecid/cancel', {}, async ({ params }) => {
    const p = parts();
    const { ecid } = parseInput(
      z.object({ ecid: z.string().regex(/^[0-9A-Z]{26}$/, 'expected a compaction id') }),
      params,
      'path',
    );
    const found = allTablets(p).find((t) => t.reservations.has(ecid));
    if (!found) throw new ExcError('NOT_FOUND', `no running compaction ${ecid}`, { details: { ecid } });
    if (!found.loc)
      throw new ExcError('UNAVAILABLE', `tablet ${found.row} is not hosted right now; try again`);
    return p.peers.get(found.loc.server).post('/v1/cancel', { tablet: found.row, ecid }, { attempts: 2 });
  });

  server.route(
    'POST',
    '/compactions/release',
    {
      body: z
        .object({ id: z.string().optional(), table: z.string().optional() })
        .refine((b) => Boolean(b.id) !== Boolean(b.table), 'give an id or a table'),
    },
    async ({ body }) => {
      const p = parts();
      const tableId = body.table ? p.tables.get(body.table).id : undefined;
      const catalog = readCatalog(p);
      const chosen: { tablet: string; id: string }[] = [];
      for (const t of catalog.tablets) {
        if (tableId && t.tableId !== tableId) continue;
        for (const [key, f] of t.failures) {
          if (!isParked(f, maxAttempts(catalog, t.tableId))) continue;
          if (body.id && key !== body.id && f.lastEcid !== body.id) continue;
          chosen.push({ tablet: t.row, id: key });
        }
      }
      const results =
        chosen.length === 0
          ? []
          : await p.commits.submit({
              mutations: chosen.map(({ tablet, id }) => ({
                conditions: [{ op: 'present' as const, row: tablet, col: failedCol(id) }],
                deletes: [{ row: tablet, col: failedCol(id) }],
              })),
            });
      const released = chosen.filter((_, i) => results[i]?.applied);
      for (const tablet of new Set(released.map((r) => r.tablet))) p.notifyTservers({ tablet });
      if (body.id && released.length === 0)
        throw new ExcError('NOT_FOUND', `no parked compaction ${body.id}`);
      return { released };
    },
  );

  server.route(
    'POST',
    '/tables/:name/compact',
    {
      body: z.object({
        startRow: z.string().optional(),
        endRow: z.string().optional(),
        filters: z.unknown().optional(),
      }),
    },
    async ({ params, body }) => {
      const p = parts();
      const { name } = parseInput(nameParam, params, 'path');
      const table = p.tables.get(name);
      const filters = body.filters === undefined ? [] : validateFilters(body.filters);
      const start = body.startRow === undefined ? undefined : Buffer.from(body.startRow, 'utf8');
      const end = body.endRow === undefined ? undefined : Buffer.from(body.endRow, 'utf8');
      if (start && end && Buffer.compare(start, end) > 0)
        throw new ExcError('BAD_REQUEST', `--start ${body.startRow} is after --end ${body.endRow}`);
      const id = ulid();
      const request = JSON.stringify({ requestedAt: Date.now(), filters });
      const chosen = p.tables.tablets(table.id).filter((t) => overlaps(t, start, end));
      await p.commits.submit({
        mutations: chosen.map((t) => ({
          conditions: [{ op: 'present' as const, row: t.row, col: 'prev' }],
          puts: [{ row: t.row, col: compactCol(id), value: request }],
        })),
      });
      for (const t of chosen) p.notifyTservers({ tablet: t.row });
      p.log.info(
        { table: name, id, tablets: chosen.length, filters: filters.map((f) => f.name) },
        'user compaction requested',
      );
      return { id, table: name, tablets: chosen.map((t) => t.row) };
    },
  );

  /** The consistency check (check.ts): named problem lists with counts, and figures. */
  server.route('GET', '/check', {}, async () => {
    const p = parts();
    const { store, session, layout, objects, gcGraceMs: graceMs, log } = p;
    return runCheck({ store, session, layout, objects, graceMs, log });
  });

  server.route('GET', '/tables/:name/compactions/:id', {}, ({ params }) => {
    const p = parts();
    const { name, id } = parseInput(
      z.object({ name: z.string(), id: z.string().regex(/^[0-9A-Z]{26}$/) }),
      params,
      'path',
    );
    const table = p.tables.get(name);
    const pending = p.tables.tablets(table.id).filter((t) => t.userCompactions.has(id));
    return { id, table: name, remaining: pending.map((t) => t.row), done: pending.length === 0 };
  });
}

function overlaps(t: TabletMeta, start?: Buffer, end?: Buffer): boolean {
  // The tablet holds (prev, end]; the range is [start, end].
  if (start && t.endRow && Buffer.compare(t.endRow, start) < 0) return false;
  if (end && t.prevEndRow && Buffer.compare(t.prevEndRow, end) >= 0) return false;
  return true;
}

function allTablets(p: AdminParts): TabletMeta[] {
  return readTablets(p.store, ALL_TABLETS.start, ALL_TABLETS.end);
}

/** The tablets and tables the compaction listings are made from: read once per request. */
interface Catalog {
  tablets: TabletMeta[];
  tables: Map<string, TableInfo>;
}

function readCatalog(p: AdminParts): Catalog {
  return { tablets: allTablets(p), tables: new Map(p.tables.list().map((t) => [t.id, t])) };
}

function tableName(c: Catalog, tableId: string): string {
  return c.tables.get(tableId)?.name ?? tableId;
}

function maxAttempts(c: Catalog, tableId: string): number {
  return c.tables.get(tableId)?.config.maxAttempts ?? 3;
}

function runningCompactions(c: Catalog, queues: QueueInfo[]): RunningCompaction[] {
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
        reservedAt: r.reservedAt,
        ageMs: now - r.reservedAt,
        progress: t.progress.get(ecid) ?? null,
        server: t.loc?.server ?? null,
      });
    }
  }
  return out.sort((a, b) => a.reservedAt - b.reservedAt);
}

function parkedCompactions(c: Catalog, queues: QueueInfo[]): ParkedCompaction[] {
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
      });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

async function compactorsOf(p: AdminParts, queue: QueueInfo): Promise<CompactorView[]> {
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
