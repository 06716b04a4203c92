/**
 * The manager's operator API: queues (create, list, info, delete), compactors, compactions (list, cancel,
 * release parked jobs) and the consistency check; user compactions are asked through
 * user-compaction-request.ts. This is what `excompact admin` talks to.
 *
 * Every call that changes something is safe to repeat after its answer was lost (a failover): queue
 * creation records its request id in the queue's node, queue deletion records what it set out to delete
 * and finishes it, release and compact write their answer with their change (requests.ts), and cancel
 * (cancel-api.ts) answers a repeat the same way or from the compaction's recorded outcome.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { MAX_BINS, parseQueueRow, prefixEnd, queueEntryTablet, queuePrefix } from '../meta/keys.js';
import { scanAll, scanRows } from '../meta/backend.js';
import { failedCol, isParked } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import {
  createQueue,
  deleteQueue,
  listQueues,
  removeQueueNode,
  resolveQueue,
  type QueueInfo,
} from '../queue/registry.js';
import type { RpcServer } from '../rpc/server.js';
import { nameSchema } from '../names.js';
import { parseInput } from '../validate.js';
import {
  compactorsOf,
  maxAttempts,
  parkedCompactions,
  readCatalog,
  runningCompactions,
  tableName,
} from './admin-views.js';
import { registerCancelApi, type CancelParts } from './cancel-api.js';
import { runCheck } from './check-read.js';
import { queueFigures } from './queue-metrics.js';
import type { GcObjectStore } from './gc.js';
import {
  answerCell,
  answerOf,
  intentCell,
  intentOf,
  partCell,
  partsOf,
  requestIdOf,
  requestIdParam,
  unanswered,
} from './requests.js';

export interface AdminParts extends CancelParts {
  /** The object store the garbage collector works on (undefined: none configured), and its grace. */
  objects: GcObjectStore | undefined;
  gcGraceMs: number;
  /** How long past its grace a leftover may wait for the collector's next sweep. */
  gcSweepSlackMs: number;
}

const queueNameParam = z.object({ name: nameSchema('queue') });

interface QueueDeletion {
  deleted: QueueInfo;
  entriesRemoved: number;
  tablesStillRouting: string[];
}
interface ReleasedJob {
  tablet: string;
  id: string;
}
export function registerAdminApi(server: RpcServer, parts: () => AdminParts): void {
  server.route(
    'POST',
    '/queues',
    { body: z.object({ name: nameSchema('queue'), bins: z.number().int().min(1).max(MAX_BINS).default(8) }) },
    async ({ body, query }) => {
      const p = parts();
      return createQueue(p.session, p.layout, body.name, body.bins, p.log, requestIdOf(query));
    },
  );

  server.route('GET', '/queues', {}, async () => {
    const p = parts();
    const queues = await listQueues(p.session, p.layout);
    const catalog = await readCatalog(p);
    const figures = queueFigures(
      catalog.tablets,
      (tableId) => maxAttempts(catalog, tableId),
      queues.map((q) => q.id),
    );
    return {
      queues: await Promise.all(
        queues.map(async (q) => ({
          ...q,
          queued: await p.store.count(queuePrefix(q.id), prefixEnd(queuePrefix(q.id))!),
          running: figures.get(q.id)?.running ?? 0,
          parked: figures.get(q.id)?.parked ?? 0,
          queuedBytes: figures.get(q.id)?.bytes ?? 0,
          compactors: (await compactorsOf(p, q)).length,
        })),
      ),
    };
  });

  server.route('GET', '/queues/:name', {}, async ({ params }) => {
    const p = parts();
    const { name } = parseInput(queueNameParam, params, 'path');
    const queue = await resolveQueue(p.session, p.layout, name);
    const catalog = await readCatalog(p);
    const queued = [];
    for await (const c of scanAll(p.store, { prefix: queuePrefix(queue.id) })) {
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
    { query: z.object({ force: z.enum(['true', 'false']).optional(), requestId: requestIdParam }) },
    async ({ params, query }) => {
      const p = parts();
      const { name } = parseInput(queueNameParam, params, 'path');
      const { requestId } = query;
      const answered = await answerOf<QueueDeletion>(p.store, requestId);
      if (answered) return answered;
      // A repeat of a deletion that got as far as ZooKeeper finds the name gone (or given to a new queue):
      // it finishes what its first attempt set out to do.
      const intent = requestId ? await intentOf<{ queue: QueueInfo }>(p.store, requestId) : undefined;
      const named = intent && (await listQueues(p.session, p.layout)).find((q) => q.name === name);
      let queue: QueueInfo;
      if (intent && named?.id !== intent.queue.id) {
        queue = intent.queue;
        // The name went; its node may not have (a queue of many compactors is deleted in steps).
        await removeQueueNode(p.session, p.layout, queue.id);
      } else {
        queue = await resolveQueue(p.session, p.layout, name);
        const routing = await p.tables.routingTo(name);
        if (routing.length > 0 && query.force !== 'true') {
          throw new ExcError(
            'CONFLICT',
            `queue ${name} is used by table${routing.length > 1 ? 's' : ''} ${routing.map((t) => t.name).join(', ')}; change their queue routes first or use --force`,
            { details: { tables: routing.map((t) => t.name) } },
          );
        }
        if (requestId) await p.commits.submit({ mutations: [{ puts: [intentCell(requestId, { queue })] }] });
        // Deleting the node (with its compactor children) makes the compactors exit and the tablet
        // servers cancel the queue's reservations; then the queue's entries go.
        await deleteQueue(p.session, p.layout, name, p.log);
      }
      const routing = await p.tables.routingTo(name);
      const rows: string[] = [];
      for await (const r of scanRows(p.store, { prefix: queuePrefix(queue.id) })) rows.push(r.row);
      for (let i = 0; i < rows.length; i += 1_000) {
        await p.commits.submit({ mutations: [{ deleteRows: rows.slice(i, i + 1_000) }] });
      }
      for (const t of routing) p.notifyTservers({ tableId: t.id });
      const answer: QueueDeletion = {
        deleted: queue,
        entriesRemoved: rows.length,
        tablesStillRouting: routing.map((t) => t.name),
      };
      if (requestId) await p.commits.submit({ mutations: [{ puts: [answerCell(requestId, answer)] }] });
      return answer;
    },
  );

  server.route(
    'GET',
    '/compactors',
    { query: z.object({ queue: nameSchema('queue').optional() }) },
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
        queue: nameSchema('queue').optional(),
        table: nameSchema('table').optional(),
        state: z.enum(['running', 'parked']).optional(),
      }),
    },
    async ({ query }) => {
      const p = parts();
      let queues = await listQueues(p.session, p.layout);
      if (query.queue) queues = [await resolveQueue(p.session, p.layout, query.queue)];
      if (query.table) await p.tables.get(query.table); // UNKNOWN_TABLE for a bad name
      const catalog = await readCatalog(p);
      const keep = (c: { queueId: string | null; table: string }) =>
        (!query.queue || c.queueId === queues[0]!.id) && (!query.table || c.table === query.table);
      return {
        running: query.state === 'parked' ? [] : runningCompactions(catalog, queues).filter(keep),
        parked: query.state === 'running' ? [] : parkedCompactions(catalog, queues).filter(keep),
      };
    },
  );

  registerCancelApi(server, parts);

  server.route(
    'POST',
    '/compactions/release',
    {
      body: z
        .object({ id: z.string().min(1).max(200).optional(), table: nameSchema('table').optional() })
        .refine((b) => Boolean(b.id) !== Boolean(b.table), 'give an id or a table'),
    },
    async ({ body, query }) => {
      const p = parts();
      const requestId = requestIdOf(query);
      const released = async (): Promise<ReleasedJob[]> => {
        const list = await partsOf<ReleasedJob>(p.store, requestId!);
        if (body.id && list.length === 0) throw new ExcError('NOT_FOUND', `no parked compaction ${body.id}`);
        return list;
      };
      if ((await answerOf(p.store, requestId)) !== undefined) return { released: await released() };
      const tableId = body.table ? (await p.tables.get(body.table)).id : undefined;
      const catalog = await readCatalog(p);
      const chosen: ReleasedJob[] = [];
      for (const t of catalog.tablets) {
        if (tableId && t.tableId !== tableId) continue;
        for (const [key, f] of t.failures) {
          if (!isParked(f, maxAttempts(catalog, t.tableId))) continue;
          if (body.id && key !== body.id && f.lastEcid !== body.id) continue;
          chosen.push({ tablet: t.row, id: key });
        }
      }
      if (body.id && chosen.length === 0) throw new ExcError('NOT_FOUND', `no parked compaction ${body.id}`);
      // Each release records itself in the request's row, and the answer is written last, in the same
      // transaction: a repeat lists exactly what the first attempt released.
      const mutations: Mutation[] = chosen.map((job) => ({
        conditions: [
          ...(requestId ? [unanswered(requestId)] : []),
          { op: 'present' as const, row: job.tablet, col: failedCol(job.id) },
        ],
        deletes: [{ row: job.tablet, col: failedCol(job.id) }],
        puts: requestId ? [partCell(requestId, `${job.tablet}/${job.id}`, job)] : [],
      }));
      if (requestId)
        mutations.push({ conditions: [unanswered(requestId)], puts: [answerCell(requestId, {})] });
      const results = mutations.length === 0 ? [] : await p.commits.submit({ mutations });
      if (requestId && !results.at(-1)?.applied) return { released: await released() };
      const done = chosen.filter((_, i) => results[i]?.applied);
      for (const tablet of new Set(done.map((r) => r.tablet))) p.notifyTservers({ tablet });
      if (body.id && done.length === 0) throw new ExcError('NOT_FOUND', `no parked compaction ${body.id}`);
      return { released: done };
    },
  );

  /** The consistency check (check.ts): named problem lists with counts, and figures. */
  server.route('GET', '/check', {}, async () => {
    const p = parts();
    const { store, session, layout, objects, gcGraceMs: graceMs, gcSweepSlackMs: sweepSlackMs, log } = p;
    return runCheck({ store, session, layout, objects, graceMs, sweepSlackMs, log });
  });
}
