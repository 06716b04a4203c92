/**
 * The manager's HTTP API (all under /v1, all authenticated). A standby manager answers every call with
 * NOT_MANAGER, which clients take as "find the active manager and try again".
 *
 * Every call that changes something is safe to send again after its answer was lost: it takes a request
 * id (`?requestId=`, see requests.ts) or is idempotent by nature (`/gc/run`). The one exception is
 * `/meta/mutate`, whose conditional mutations the caller reads back instead (src/meta/client.ts).
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { MAX_BINS, QUEUE_ID_RE } from '../meta/keys.js';
import { locationSchema } from '../meta/tablet.js';
import { describeTablet } from '../meta/views.js';
import type { MetaBackend } from '../meta/backend.js';
import type { FoundWork } from './work-finder.js';
import { apiMutationsSchema, rowRequestSchema, rowsRequestSchema, scanSchema } from '../meta/types.js';
import type { RpcServer } from '../rpc/server.js';
import { nameSchema } from '../names.js';
import { parseInput } from '../validate.js';
import type { ChangeFeed } from './change-feed.js';
import type { CommitQueue } from './commit-queue.js';
import type { GarbageCollector } from './gc.js';
import type { LiveTservers } from './live-tservers.js';
import { COL_DRAIN, drainCell, drains, readDrains, tserverRow } from './drains.js';
import { createTableSchema } from './table-create.js';
import type { ActivityIndex } from './tablet-activity.js';
import type { Tables } from './tables.js';
import { requestIdOf } from './requests.js';
import type { MergeParts } from './merges.js';
import type { WorkFinder } from './work-finder.js';

/** What the routes need; present only while the manager is active. */
/** Tablets a page of `GET /v1/tables/:name` holds at most. */
export const MAX_TABLET_PAGE = 10_000;
const tabletPageQuery = z.object({
  after: z
    .string()
    .max(1_000)
    .regex(/^[\x20-\x7e]*$/, 'a tablet row (printable ASCII)')
    .optional(),
  limit: z.coerce.number().int().min(0).max(MAX_TABLET_PAGE).default(MAX_TABLET_PAGE),
});

export interface ActiveParts {
  store: MetaBackend;
  /** Which tablets have work, and what each server hosts, kept by the applied mutations. */
  activity: ActivityIndex;
  commits: CommitQueue;
  tables: Tables;
  live: LiveTservers;
  gc: GarbageCollector | undefined;
  epoch: number;
  unload: (server: string, tablet: string) => Promise<void>;
  kickAssignment: () => void;
  work: WorkFinder;
  /** What a tablet merge needs (merges.ts). */
  merging: MergeParts;
  /** The rows changed lately, for the tablet servers to re-read (change-feed.ts). */
  feed: ChangeFeed;
  /** Best effort: ask every live tablet server to re-read a table's settings or a tablet's row. */
  notifyTservers: (what: { tableId?: string; tablet?: string }) => void;
}

const tableNameParam = z.object({ name: nameSchema('table') });
/** A tablet server's name, `host:port` (its node under /excompact/tservers). */
const serverParam = z.object({
  server: z
    .string()
    .min(3)
    .max(300)
    .regex(/^[A-Za-z0-9._[\]:-]+:\d{1,5}$/, 'expected a tablet server as host:port'),
});

export function registerManagerApi(
  server: RpcServer,
  parts: () => ActiveParts,
  status: () => Record<string, unknown>,
  /** Told each queue entry (`~cq` row) handed to a compactor (excompact_pickup_seconds). */
  onPickup?: (work: FoundWork) => void,
): void {
  server.route('GET', '/status', {}, () => status());

  server.route('POST', '/meta/scan', { body: scanSchema }, ({ body }) => parts().store.scan(body));

  server.route(
    'POST',
    '/meta/mutate',
    {
      body: z.object({
        mutations: apiMutationsSchema,
        fence: locationSchema.optional(),
      }),
    },
    async ({ body }) => ({ results: await parts().commits.submit({ ...body, validated: true }) }),
  );

  server.route('POST', '/meta/row', { body: rowRequestSchema }, async ({ body }) => ({
    row: body.row,
    cols: Object.fromEntries(await parts().store.row(body.row)),
  }));

  // Many rows at once: a tablet server loading hundreds of tablets reads them in one request.
  server.route('POST', '/meta/rows', { body: rowsRequestSchema }, async ({ body }) => {
    const store = parts().store;
    const rows: Record<string, Record<string, string>> = {};
    for (const row of new Set(body.rows)) rows[row] = Object.fromEntries(await store.row(row));
    return { rows };
  });

  server.route(
    'POST',
    '/meta/changes',
    {
      body: z.object({
        cursor: z.object({ feed: z.string().max(64), seq: z.number().int().min(0) }).optional(),
        /** The asking tablet server: the rows only it changed are left out. */
        server: serverParam.shape.server.optional(),
      }),
    },
    ({ body }) => parts().feed.since(body.cursor, body.server),
  );

  server.route('POST', '/tables', { body: createTableSchema }, async ({ body, query }) => {
    const p = parts();
    const table = await p.tables.create(body, requestIdOf(query));
    p.kickAssignment();
    return table;
  });

  server.route('GET', '/tables', {}, async () => ({ tables: await parts().tables.list() }));

  server.route(
    'POST',
    '/queues/next',
    {
      body: z.object({
        queueId: z.string().regex(QUEUE_ID_RE),
        bins: z.number().int().min(1).max(MAX_BINS),
        startBin: z.number().int().min(0),
        /** Long poll: wait up to this long for work to appear. */
        waitMs: z.number().int().min(0).max(60_000).default(0),
      }),
    },
    async ({ body, signal }) => {
      const p = parts();
      const work = await p.work.next(body.queueId, body.startBin % body.bins, body.bins, body.waitMs, signal);
      if (!work) return { work };
      onPickup?.(work);
      const { queuedAt: _queuedAt, ...sent } = work;
      return { work: sent };
    },
  );

  // A page of a table's tablets (10,000 at most: a view of 100,000 built at once holds the manager's
  // thread for seconds); `next` says where the following page starts.
  server.route('GET', '/tables/:name', { query: tabletPageQuery }, async ({ params, query }) => {
    const { name } = parseInput(tableNameParam, params, 'path');
    const p = parts();
    const table = await p.tables.get(name);
    const page = await p.tables.tabletsPage(table.id, query.after, query.limit);
    return { table, tablets: page.tablets.map(describeTablet), ...(page.next ? { next: page.next } : {}) };
  });

  server.route(
    'POST',
    '/tables/:name/config',
    { body: z.object({ config: z.record(z.string(), z.unknown()) }) },
    async ({ params, body, query }) => {
      const { name } = parseInput(tableNameParam, params, 'path');
      const p = parts();
      const table = await p.tables.configure(name, body.config, requestIdOf(query));
      p.notifyTservers({ tableId: table.id });
      return table;
    },
  );

  server.route('DELETE', '/tables/:name', {}, async ({ params, query }) => {
    const { name } = parseInput(tableNameParam, params, 'path');
    const p = parts();
    return p.tables.delete(name, p.unload, requestIdOf(query));
  });

  server.route('GET', '/tservers', {}, async () => {
    const p = parts();
    // What each server hosts, from the index kept by the applied mutations: no read of the tablets.
    const counts = (await p.activity.current()).hosts;
    const drained = await readDrains(p.store);
    return {
      tservers: [...p.live.all].map(([server, session]) => ({
        server,
        session,
        tablets: counts.get(server)?.tablets ?? 0,
        bytes: counts.get(server)?.bytes ?? 0,
        draining: drains(drained.get(server), session),
      })),
    };
  });

  // Idempotent: draining a drained server (or undoing a drain that is not there) changes nothing.
  server.route(
    'POST',
    '/tservers/:server/drain',
    {
      body: z.object({
        /** Undo an admin's drain: the server takes tablets again. */
        undo: z.boolean().default(false),
        /** A server draining itself as it stops: only while this session is its own. */
        session: z
          .string()
          .regex(/^[0-9a-f]{16}$/)
          .optional(),
        reason: z.string().max(200).optional(),
      }),
    },
    async ({ params, body }) => {
      const { server } = parseInput(serverParam, params, 'path');
      const p = parts();
      const mutation = body.undo
        ? { deletes: [{ row: tserverRow(server), col: COL_DRAIN }] }
        : {
            puts: [
              drainCell(server, {
                at: Date.now(),
                ...(body.session ? { session: body.session } : {}),
                ...(body.reason ? { reason: body.reason } : {}),
              }),
            ],
          };
      await p.commits.submit({ mutations: [mutation] });
      p.kickAssignment();
      return { server, draining: !body.undo, live: p.live.all.has(server) };
    },
  );

  // Idempotent: a repeat runs another cycle, which deletes only what is garbage by then. A cycle run on
  // request also sweeps the store for leftovers.
  server.route('POST', '/gc/run', {}, async () => {
    const gc = parts().gc;
    if (!gc) throw new ExcError('CONFLICT', 'garbage collection is not configured (no object store)');
    await gc.runCycle({ sweep: true });
    return gc.stats;
  });
}
