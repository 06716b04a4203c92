/**
 * The tablet server's HTTP API (all under /v1, all authenticated).
 *
 *   POST /v1/tablets/load     { tablet | tablets, session }  from the manager (up to 1,000 tablets)
 *   POST /v1/tablets/unload   { tablet }                 from the manager
 *   POST /v1/tablets/refresh  { tablet? , tableId? }     from the manager (user compaction, config, release)
 *   POST /v1/tablets/split    { tablet, rowsHex }        from the manager (admin table split)
 *   POST /v1/tablets/merge    { tablets, waitMs }        from the manager (admin table merge, mergeBelow)
 *   POST /v1/ingest           { tablet, entries }
 *   POST /v1/scan             { tablet, startRow?, endRow?, afterRow?, limit?, filters? }
 *   POST /v1/import           { tablet, importId, rows, files }      a bulk import's files (bulk-import.ts)
 *   POST /v1/reserve          { tablet, queueId, compactor }          → { job } or { job: null } (no work)
 *   POST /v1/commit           { tablet, ecid, compactor, output }
 *   POST /v1/progress         { tablet, ecid, compactor, progress, checkpoint? }
 *   POST /v1/fail             { tablet, ecid, compactor, error }      a compactor reports a failed job
 *   POST /v1/release          { tablet, ecid, compactor }             a compactor gives a job back (shutdown)
 *   POST /v1/cancel           { tablet, ecid }                        an admin cancels a reservation
 *   POST /v1/link             { compactor }                           held open while the compactor lives
 *                                                                      (see compactor-links.ts)
 *   GET  /v1/status
 */
import { z } from 'zod';
import { ExcError, describeError } from '../errors.js';
import { fileFiguresSchema } from '../meta/file-stats.js';
import { QUEUE_ID_RE } from '../meta/keys.js';
import type { RpcServer } from '../rpc/server.js';
import type { Generation } from './generation.js';
import type { Hosting } from './hosting.js';
import type { Reservations } from './reservations.js';

const tablet = z.string().min(1).max(200);
/** Tablets one load request names at most. */
export const MAX_LOADS = 1_000;
const ecid = z.string().regex(/^[0-9A-HJKMNP-TV-Z]{26}$/, 'expected a ULID');
const compactor = z.string().min(1).max(1000);

export interface TserverApiDeps {
  /** What serves requests now: the generation of the current session (UNAVAILABLE while rejoining). */
  current: () => Generation;
  /** The parent of every compactor node (a link names a compactor by its node). */
  compactorsRoot: string;
  status: () => Record<string, unknown>;
}

export function registerTserverApi(server: RpcServer, deps: TserverApiDeps): void {
  const { current } = deps;
  const hosting = (): Hosting => current().hosting;
  const reservations = (): Reservations => current().reservations;

  server.route('GET', '/status', {}, () => deps.status());

  server.route(
    'POST',
    '/tablets/load',
    {
      body: z.union([
        z.object({ tablet, session: z.string() }).strict(),
        z.object({ tablets: z.array(tablet).min(1).max(MAX_LOADS), session: z.string() }).strict(),
      ]),
    },
    async ({ body }) => {
      const g = current();
      if (body.session !== g.me.session) {
        throw new ExcError(
          'CONFLICT',
          `load was meant for session ${body.session}, this server is ${g.me.session}`,
        );
      }
      if ('tablet' in body) {
        await g.hosting.load(body.tablet);
        return { loaded: true };
      }
      // Many at once (a new table, a dead server's tablets): their reads and writes go as a few requests.
      const outcomes = await Promise.allSettled(body.tablets.map((t) => g.hosting.load(t)));
      return {
        loaded: body.tablets.filter((_, i) => outcomes[i]!.status === 'fulfilled'),
        failed: outcomes.flatMap((o, i) =>
          o.status === 'rejected' ? [{ tablet: body.tablets[i]!, error: describeError(o.reason) }] : [],
        ),
      };
    },
  );

  server.route(
    'POST',
    '/tablets/unload',
    { body: z.object({ tablet, offline: z.boolean().default(false) }) },
    async ({ body }) => {
      // Its table taken offline: its compactions are cancelled first (table-offline.ts).
      if (body.offline) return { unloaded: true, cancelled: await current().offline.letGo(body.tablet) };
      await hosting().unload(body.tablet, 'unload requested');
      return { unloaded: true };
    },
  );

  server.route(
    'POST',
    '/tablets/refresh',
    { body: z.object({ tablet: tablet.optional(), tableId: z.string().optional() }) },
    async ({ body }) => {
      const g = current();
      if (body.tableId) await g.refreshTable(body.tableId);
      if (body.tablet) await g.hosting.refresh(body.tablet);
      return { refreshed: true };
    },
  );

  server.route(
    'POST',
    '/tablets/split',
    {
      body: z.object({
        tablet,
        rowsHex: z
          .array(z.string().regex(/^(?:[0-9a-f]{2})+$/, 'expected a non-empty lower-case hex byte string'))
          .min(1)
          .max(1_000),
      }),
    },
    async ({ body }) =>
      current().splits.split(
        body.tablet,
        body.rowsHex.map((h) => Buffer.from(h, 'hex')),
        'admin',
      ),
  );

  server.route(
    'POST',
    '/tablets/merge',
    {
      body: z.object({
        tablets: z.array(tablet).min(2).max(1_000),
        waitMs: z.number().int().min(0).max(600_000),
      }),
    },
    async ({ body }) => current().merges.merge(body.tablets, body.waitMs),
  );

  server.route('POST', '/ingest', {}, ({ body }) => current().data.ingest(body));
  server.route('POST', '/scan', {}, ({ body }) => current().data.scan(body));
  server.route('POST', '/import', {}, ({ body }) => current().imports.import(body));

  server.route(
    'POST',
    '/reserve',
    {
      body: z.object({
        tablet,
        queueId: z.string().regex(QUEUE_ID_RE),
        compactor,
        requestId: ecid.optional(),
      }),
    },
    async ({ body }) => ({ job: await reservations().reserve(body) }),
  );

  server.route(
    'POST',
    '/commit',
    {
      body: z.object({
        tablet,
        ecid,
        compactor,
        output: fileFiguresSchema
          .refine((o) => o.entries > 0, { message: 'an output holds at least one entry (null: none)' })
          .nullable(),
      }),
    },
    async ({ body }) => {
      await reservations().commit(body);
      return { committed: true };
    },
  );

  server.route(
    'POST',
    '/progress',
    {
      body: z.object({
        tablet,
        ecid,
        compactor,
        progress: z.object({
          entriesRead: z.number().nonnegative(),
          entriesWritten: z.number().nonnegative(),
          bytesRead: z.number().nonnegative(),
          bytesWritten: z.number().nonnegative(),
          // Absent from a compactor of an earlier version.
          bytesComposed: z.number().nonnegative().optional(),
        }),
        checkpoint: z
          .object({
            parts: z
              .array(z.object({ name: z.string().min(1).max(1024), size: z.number().int().nonnegative() }))
              .min(1)
              .max(100_000),
            bytes: z.number().int().positive(),
            state: z.string().min(1),
          })
          .optional(),
      }),
    },
    async ({ body }) => {
      await reservations().progress(body.tablet, body.ecid, body.compactor, body.progress, body.checkpoint);
      return { ok: true };
    },
  );

  const owned = z.object({ tablet, ecid, compactor });
  server.route(
    'POST',
    '/fail',
    { body: owned.extend({ error: z.string().max(4_000) }) },
    async ({ body }) => ({
      cancelled: await reservations().cancel(body.tablet, body.ecid, 'failed', {
        compactor: body.compactor,
        error: body.error,
      }),
    }),
  );

  server.route('POST', '/release', { body: owned }, async ({ body }) => ({
    cancelled: await reservations().cancel(body.tablet, body.ecid, 'released', { compactor: body.compactor }),
  }));

  server.route('POST', '/cancel', { body: z.object({ tablet, ecid }) }, async ({ body }) => ({
    cancelled: await reservations().cancel(body.tablet, body.ecid, 'admin'),
  }));

  // Answered only when this server stops; the compactor's death shows as the connection closing.
  server.route('POST', '/link', { body: z.object({ compactor }) }, async ({ body, signal }) => {
    if (!body.compactor.startsWith(`${deps.compactorsRoot}/`)) {
      throw new ExcError('BAD_REQUEST', `${body.compactor} is not a compactor node`);
    }
    return { stopped: await current().links.hold(body.compactor, signal) };
  });
}
