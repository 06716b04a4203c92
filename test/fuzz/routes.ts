/**
 * Every RPC route of every process, as a generator of requests with valid signatures and generated
 * inputs (see inputs.ts), and for the routes that change something the documented effect a success must
 * have had. Raw metadata mutations are confined to rows under `~fuzz:`: writing arbitrary tablet or
 * table rows is what that route is for (the tablet servers' own channel), so a fuzzer that did it would
 * only be testing what the cluster makes of garbage it was told to store.
 */
import fc from 'fast-check';
import {
  anyJson,
  bytesArb,
  fields,
  filterArb,
  nameArb,
  numberArb,
  selectorArb,
  tableConfigArb,
  tableIteratorArb,
  ulidArb,
  wrongArb,
  type Known,
} from './inputs.js';

export type Target = 'manager' | 'tserver' | 'compactor';

/** What a check of an effect can ask the cluster. */
export interface EffectContext {
  manager(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }>;
}

export interface Case {
  /** `METHOD /v1/path/:param`: the route, for the figures. */
  route: string;
  target: Target;
  method: 'GET' | 'POST' | 'DELETE';
  /** Path and query, encoded. */
  path: string;
  /** A JSON body, or raw text (not JSON) when `raw` is set. */
  body?: unknown;
  raw?: string;
  /** The route may hold the request open (long poll, link): no answer within the timeout is an answer. */
  holds?: boolean;
  /** For a 2xx: null when the documented effect is there, else what is wrong. */
  effect?: (answer: unknown, ctx: EffectContext) => Promise<string | null>;
}

/** Percent-encodes every byte outside the unreserved set (even a lone surrogate, as its UTF-8 bytes). */
export function enc(text: string): string {
  let out = '';
  for (const b of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9_.~-]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const requestIdQuery = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 2, arbitrary: fc.ulid().map((id) => `?requestId=${id}`) },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }).map((s) => `?requestId=${enc(s)}`) },
);

type Spec = Omit<Case, 'route'> & { route?: string };

function route(template: string, arb: fc.Arbitrary<Spec>): fc.Arbitrary<Case> {
  return arb.map((spec) => ({ route: template, ...spec }));
}

/** Checks a table as the manager shows it after a change. */
async function tableIs(ctx: EffectContext, name: string, config: unknown): Promise<string | null> {
  const got = await ctx.manager('GET', `/v1/tables/${enc(name)}`);
  if (got.status !== 200) return `table ${name} is not there after the change (${got.status})`;
  const table = (got.json as { table: { config: unknown } }).table;
  return JSON.stringify(table.config) === JSON.stringify(config)
    ? null
    : `table ${name} has config ${JSON.stringify(table.config)}, the answer said ${JSON.stringify(config)}`;
}

async function queueNames(ctx: EffectContext): Promise<string[]> {
  const got = await ctx.manager('GET', '/v1/queues');
  return (got.json as { queues: { name: string }[] }).queues.map((q) => q.name);
}

/** Manager routes (src/manager/api.ts, admin-api.ts, history-api.ts). */
function managerRoutes(k: Known): fc.Arbitrary<Case>[] {
  const table = nameArb(k.tables);
  const queue = nameArb(k.queues);
  const m = 'manager' as const;
  const fuzzRow = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('', '\u0000', 'é', 'x'.repeat(5000)),
  );
  const row = fuzzRow.map((s) => `~fuzz:${s}`);
  const cell = fields({ row, col: fc.string({ maxLength: 8 }), value: fc.string({ maxLength: 40 }) });
  const condition = fields({
    op: fc.constantFrom('equals', 'absent', 'present', 'noColumnWithPrefix', 'nope'),
    row,
    col: fc.string({ maxLength: 8 }),
    value: fc.string({ maxLength: 8 }),
    prefix: fc.string({ maxLength: 4 }),
  });
  return [
    route('GET /v1/ping', fc.constant({ target: m, method: 'GET', path: '/v1/ping' })),
    route('GET /v1/status', fc.constant({ target: m, method: 'GET', path: '/v1/status' })),
    route(
      'POST /v1/meta/scan',
      fields({
        start: fc.string({ maxLength: 6 }),
        end: fc.string({ maxLength: 6 }),
        prefix: fc.string({ maxLength: 6 }),
        colPrefix: fc.string({ maxLength: 4 }),
        limit: numberArb,
        after: fields({ row: fc.string({ maxLength: 6 }), col: fc.string({ maxLength: 4 }) }),
      }).map((body) => ({ target: m, method: 'POST', path: '/v1/meta/scan', body })),
    ),
    route(
      'POST /v1/meta/mutate',
      fields({
        mutations: fc.array(
          fields({
            conditions: fc.array(condition, { maxLength: 2 }),
            puts: fc.array(cell, { maxLength: 2 }),
            deletes: fc.array(fields({ row, col: fc.string({ maxLength: 8 }) }), { maxLength: 2 }),
            deleteRows: fc.array(row, { maxLength: 2 }),
          }),
          { maxLength: 3 },
        ),
        fence: fields({ server: fc.string({ maxLength: 20 }), session: fc.string({ maxLength: 20 }) }),
      }).map((body) => ({ target: m, method: 'POST', path: '/v1/meta/mutate', body })),
    ),
    route(
      'POST /v1/meta/row',
      fields({ row: fc.oneof(row, fc.constantFrom(...k.tablets, ''), fc.string()) }).map((body) => ({
        target: m,
        method: 'POST',
        path: '/v1/meta/row',
        body,
      })),
    ),
    route(
      'POST /v1/meta/rows',
      fields({
        rows: fc.oneof(
          fc.array(fc.oneof(row, fc.constantFrom(...k.tablets, ''), fc.string()), { maxLength: 3 }),
          fc.constant([]),
        ),
      }).map((body) => ({ target: m, method: 'POST', path: '/v1/meta/rows', body })),
    ),
    route(
      'POST /v1/meta/changes',
      fields({
        cursor: fc.oneof(
          fields({ feed: fc.string({ maxLength: 70 }), seq: numberArb }),
          fc.constantFrom(null, 'x', []),
        ),
        server: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('ts-1', '../x')),
      }).map((body) => ({ target: m, method: 'POST', path: '/v1/meta/changes', body })),
    ),
    route(
      'POST /v1/tables',
      fc
        .tuple(
          fields({
            name: table,
            splits: fc.array(fc.oneof(fc.constantFrom('a', 'm', 'z', 'm'), fc.string({ maxLength: 4 })), {
              maxLength: 4,
            }),
            splitsHex: fc.array(
              fc.oneof(fc.stringMatching(/^([0-9a-f]{2}){1,3}$/), fc.string({ maxLength: 4 })),
              {
                maxLength: 2,
              },
            ),
            config: tableConfigArb(k.queues),
          }),
          requestIdQuery,
        )
        .map(([body, q]) => ({
          target: m,
          method: 'POST',
          path: `/v1/tables${q}`,
          body,
          effect: async (answer, ctx) => {
            const a = answer as { name: string; config: unknown };
            return tableIs(ctx, a.name, a.config);
          },
        })),
    ),
    route('GET /v1/tables', fc.constant({ target: m, method: 'GET', path: '/v1/tables' })),
    route(
      'GET /v1/tables/:name',
      fc
        .tuple(
          table,
          fc.option(fc.oneof(fc.constantFrom(...k.tablets, '', '\u0000', '~'), fc.string({ maxLength: 6 }))),
          fc.option(fc.oneof(fc.constantFrom('0', '1', '-1', '10001', 'x'), fc.string({ maxLength: 3 }))),
        )
        .map(([n, after, limit]) => {
          const q = [
            ...(after === null ? [] : [`after=${enc(after)}`]),
            ...(limit === null ? [] : [`limit=${enc(limit)}`]),
          ];
          return {
            target: m,
            method: 'GET',
            path: `/v1/tables/${enc(n)}${q.length ? `?${q.join('&')}` : ''}`,
          };
        }),
    ),
    route(
      'POST /v1/tables/:name/config',
      fc.tuple(table, fields({ config: tableConfigArb(k.queues) }), requestIdQuery).map(([n, body, q]) => ({
        target: m,
        method: 'POST',
        path: `/v1/tables/${enc(n)}/config${q}`,
        body,
        effect: async (answer, ctx) => tableIs(ctx, n, (answer as { config: unknown }).config),
      })),
    ),
    route(
      'DELETE /v1/tables/:name',
      fc.tuple(table, requestIdQuery).map(([n, q]) => ({
        target: m,
        method: 'DELETE',
        path: `/v1/tables/${enc(n)}${q}`,
        effect: async (_answer, ctx) => {
          const got = await ctx.manager('GET', `/v1/tables/${enc(n)}`);
          return got.status === 404 ? null : `table ${n} is still there after its deletion (${got.status})`;
        },
      })),
    ),
    // Offline and back: the table's state says so (a deleted table's offline is refused).
    ...(['offline', 'online'] as const).map((state) =>
      route(
        `POST /v1/tables/:name/${state}`,
        fc.tuple(table, requestIdQuery).map(([n, q]) => ({
          target: m,
          method: 'POST',
          path: `/v1/tables/${enc(n)}/${state}${q}`,
          effect: async (_answer, ctx) => {
            const got = await ctx.manager('GET', `/v1/tables/${enc(n)}`);
            const now = (got.json as { table?: { state?: string } }).table?.state;
            return now === state ? null : `table ${n} is ${now} after ${state} (${got.status})`;
          },
        })),
      ),
    ),
    route(
      'POST /v1/queues/next',
      fields({
        queueId: fc.oneof(fc.stringMatching(/^[0-9a-z]{4}$/), fc.string({ maxLength: 6 })),
        bins: numberArb,
        startBin: numberArb,
        waitMs: fc.oneof(fc.constantFrom(0, 1, 100), numberArb),
      }).map((body) => ({ target: m, method: 'POST', path: '/v1/queues/next', body, holds: true })),
    ),
    route('GET /v1/tservers', fc.constant({ target: m, method: 'GET', path: '/v1/tservers' })),
    route('POST /v1/gc/run', fc.constant({ target: m, method: 'POST', path: '/v1/gc/run', body: {} })),
    route(
      'POST /v1/queues',
      fc.tuple(fields({ name: queue, bins: numberArb }), requestIdQuery).map(([body, q]) => ({
        target: m,
        method: 'POST',
        path: `/v1/queues${q}`,
        body,
        effect: async (answer, ctx) => {
          const name = (answer as { name: string }).name;
          return (await queueNames(ctx)).includes(name)
            ? null
            : `queue ${name} is not listed after its creation`;
        },
      })),
    ),
    route('GET /v1/queues', fc.constant({ target: m, method: 'GET', path: '/v1/queues' })),
    route(
      'GET /v1/queues/:name',
      queue.map((n) => ({ target: m, method: 'GET', path: `/v1/queues/${enc(n)}` })),
    ),
    route(
      'DELETE /v1/queues/:name',
      fc
        .tuple(queue, fc.constantFrom('', 'force=true', 'force=false', 'force=yes'), requestIdQuery)
        .map(([n, force, q]) => ({
          target: m,
          method: 'DELETE',
          path: `/v1/queues/${enc(n)}${q}${force ? `${q ? '&' : '?'}${force}` : ''}`,
          effect: async (_answer, ctx) =>
            (await queueNames(ctx)).includes(n) ? `queue ${n} is still listed after its deletion` : null,
        })),
    ),
    route(
      'GET /v1/compactors',
      fc.option(queue).map((n) => ({
        target: m,
        method: 'GET',
        path: `/v1/compactors${n === null ? '' : `?queue=${enc(n)}`}`,
      })),
    ),
    route(
      'GET /v1/compactions',
      fc
        .tuple(
          fc.option(queue),
          fc.option(table),
          fc.option(fc.constantFrom('running', 'parked', 'done', '')),
        )
        .map(([q, t, s]) => {
          const params = [
            q === null ? '' : `queue=${enc(q)}`,
            t === null ? '' : `table=${enc(t)}`,
            s === null ? '' : `state=${enc(s)}`,
          ].filter(Boolean);
          return {
            target: m,
            method: 'GET',
            path: `/v1/compactions${params.length ? `?${params.join('&')}` : ''}`,
          };
        }),
    ),
    route(
      'GET /v1/compactions/history',
      fc
        .record(
          {
            since: fc.oneof(numberArb.map(String), fc.string({ maxLength: 6 })),
            table,
            queue: fc.oneof(fc.stringMatching(/^[0-9a-z]{4}$/), fc.string({ maxLength: 5 })),
            outcome: fc.constantFrom('committed', 'cancelled', 'x'),
            limit: fc.oneof(numberArb.map(String), fc.string({ maxLength: 4 })),
            before: ulidArb,
          },
          { requiredKeys: [] },
        )
        .map((params) => {
          const q = Object.entries(params).map(([key, v]) => `${key}=${enc(String(v))}`);
          return {
            target: m,
            method: 'GET',
            path: `/v1/compactions/history${q.length ? `?${q.join('&')}` : ''}`,
          };
        }),
    ),
    route(
      'POST /v1/compactions/:id/cancel',
      fc.oneof(ulidArb, fc.stringMatching(/^[0-9a-f]{24}$/)).map((id) => ({
        target: m,
        method: 'POST',
        path: `/v1/compactions/${enc(id)}/cancel`,
        body: {},
      })),
    ),
    route(
      'POST /v1/compactions/release',
      fc
        .tuple(fields({ id: fc.oneof(ulidArb, fc.string({ maxLength: 8 })), table }), requestIdQuery)
        .map(([body, q]) => ({ target: m, method: 'POST', path: `/v1/compactions/release${q}`, body })),
    ),
    route(
      'POST /v1/tables/:name/compact',
      fc
        .tuple(
          table,
          fields({
            startRow: fc.oneof(fc.constantFrom('a', 'm', 'z', ''), fc.string({ maxLength: 4 })),
            endRow: fc.oneof(fc.constantFrom('a', 'm', 'z', ''), fc.string({ maxLength: 4 })),
            // The same bounds as hex bytes: mostly absent (both forms at once is refused).
            startRowHex: fc.oneof(
              { weight: 3, arbitrary: fc.constant(undefined) },
              {
                weight: 1,
                arbitrary: fc.oneof(fc.constantFrom('61', '6D', '80ff', ''), fc.string({ maxLength: 4 })),
              },
            ),
            endRowHex: fc.oneof(
              { weight: 3, arbitrary: fc.constant(undefined) },
              {
                weight: 1,
                arbitrary: fc.oneof(fc.constantFrom('7a', 'ff', '8001', ''), fc.string({ maxLength: 4 })),
              },
            ),
            filters: fc.oneof(fc.array(filterArb, { maxLength: 3 }), anyJson),
            select: fc.oneof(fc.array(selectorArb, { maxLength: 3 }), anyJson),
          }),
          requestIdQuery,
        )
        .map(([n, body, q]) => ({
          target: m,
          method: 'POST',
          path: `/v1/tables/${enc(n)}/compact${q}`,
          body,
          effect: async (answer, ctx) => {
            const a = answer as { id?: unknown; tablets?: unknown };
            if (typeof a.id !== 'string' || !Array.isArray(a.tablets))
              return `answer ${JSON.stringify(answer)}`;
            // The compaction can be followed by its id.
            const status = await ctx.manager('GET', `/v1/user-compactions/${enc(a.id)}`);
            return status.status === 200 ? null : `its status answers ${status.status}`;
          },
        })),
    ),
    route('GET /v1/check', fc.constant({ target: m, method: 'GET', path: '/v1/check' })),
    // The shape of a table: splits and merges (a row already a split point, a range of one tablet, are
    // no errors), and drains of tablet servers, named well or badly.
    route(
      'POST /v1/tables/:name/split',
      fc
        .tuple(
          table,
          fields({
            rows: fc.array(fc.oneof(fc.string({ maxLength: 6 }), anyJson), { maxLength: 3 }),
            rowsHex: fc.array(fc.oneof(fc.stringMatching(/^(?:[0-9a-f]{2}){1,3}$/), fc.string()), {
              maxLength: 3,
            }),
          }),
        )
        .map(([n, body]) => ({ target: m, method: 'POST', path: `/v1/tables/${enc(n)}/split`, body })),
    ),
    route(
      'POST /v1/tables/:name/merge',
      fc
        .tuple(
          table,
          fields({
            startRow: fc.string({ maxLength: 4 }),
            endRow: fc.string({ maxLength: 4 }),
            startRowHex: fc.oneof(fc.stringMatching(/^(?:[0-9a-f]{2}){0,2}$/), fc.string({ maxLength: 4 })),
            endRowHex: fc.oneof(fc.stringMatching(/^(?:[0-9a-f]{2}){0,2}$/), fc.string({ maxLength: 4 })),
          }),
        )
        .map(([n, body]) => ({ target: m, method: 'POST', path: `/v1/tables/${enc(n)}/merge`, body })),
    ),
    route(
      'POST /v1/tservers/:server/drain',
      fc
        .tuple(
          fc.oneof(fc.constant('127.0.0.1:1'), fc.string({ maxLength: 24 }), wrongArb),
          // Always undone: a drain that stayed would leave the fuzz cluster's tablets nowhere to go.
          fields({ session: fc.string({ maxLength: 20 }), reason: fc.string({ maxLength: 10 }) }),
        )
        .map(([server, body]) => ({
          target: m,
          method: 'POST',
          path: `/v1/tservers/${enc(String(server))}/drain`,
          body: { ...(body as object), undo: true },
        })),
    ),
    route(
      'GET /v1/user-compactions/:id',
      ulidArb.map((id) => ({ target: m, method: 'GET', path: `/v1/user-compactions/${enc(id)}` })),
    ),
    route(
      'GET /v1/tables/:name/summaries',
      fc
        .tuple(
          table,
          fc.option(fc.oneof(fc.constantFrom('61', '6D', '', 'zz', '8'), fc.string({ maxLength: 4 }))),
        )
        .map(([n, end]) => ({
          target: m,
          method: 'GET',
          path: `/v1/tables/${enc(n)}/summaries${end === null ? '' : `?endRowHex=${enc(end)}`}`,
        })),
    ),
    route(
      'POST /v1/tables/:name/iterators',
      fc
        .tuple(
          table,
          fc.oneof(
            fields({ add: tableIteratorArb }),
            fields({ remove: fc.constantFrom('c', 'f', 'sum-1', '', 'x'.repeat(70)) }),
            anyJson,
          ),
          requestIdQuery,
        )
        .map(([n, body, q]) => ({
          target: m,
          method: 'POST',
          path: `/v1/tables/${enc(n)}/iterators${q}`,
          body,
          effect: async (answer, ctx) => tableIs(ctx, n, (answer as { config: unknown }).config),
        })),
    ),
    route(
      'GET /v1/tables/:name/compactions/:id',
      fc.tuple(table, ulidArb).map(([n, id]) => ({
        target: m,
        method: 'GET',
        path: `/v1/tables/${enc(n)}/compactions/${enc(id)}`,
      })),
    ),
  ];
}

/** Tablet server routes (src/tserver/api.ts) and the compactor's status route. */
function workerRoutes(k: Known): fc.Arbitrary<Case>[] {
  const t = 'tserver' as const;
  const tablet = fc.oneof(
    { weight: 3, arbitrary: k.tablets.length > 0 ? fc.constantFrom(...k.tablets) : fc.constant('0001<') },
    { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 12 }), wrongArb) },
  );
  const compactor = fc.oneof(
    k.compactors.length > 0 ? fc.constantFrom(...k.compactors) : fc.constant('/c'),
    fc.string({ maxLength: 20 }),
    fc.constant(`${k.compactors[0]?.replace(/\/[^/]*$/, '') ?? ''}/c-0000000999`),
  );
  const ecid = ulidArb;
  const post = (path: string, body: fc.Arbitrary<Record<string, unknown>>, holds = false) =>
    route(
      `POST ${path}`,
      body.map((b) => ({ target: t, method: 'POST' as const, path, body: b, holds })),
    );
  const entry = fields({
    row: bytesArb,
    family: bytesArb,
    qualifier: bytesArb,
    value: fc.oneof(fc.string({ maxLength: 20 }), anyJson),
    timestamp: numberArb,
    delete: fc.boolean(),
  });
  return [
    route('GET /v1/status', fc.constant({ target: t, method: 'GET', path: '/v1/status' })),
    route(
      'GET /v1/status (compactor)',
      fc.constant({ target: 'compactor', method: 'GET', path: '/v1/status' }),
    ),
    post(
      '/v1/tablets/load',
      fc.oneof(
        fields({ tablet, session: fc.oneof(fc.constant(k.tserverSession), fc.string()) }),
        fields({
          tablets: fc.oneof(fc.array(tablet, { maxLength: 3 }), fc.constant([])),
          session: fc.oneof(fc.constant(k.tserverSession), fc.string()),
        }),
      ),
    ),
    post('/v1/tablets/unload', fields({ tablet, offline: fc.boolean() })),
    post(
      '/v1/tablets/split',
      fields({
        tablet,
        rowsHex: fc.array(
          fc.oneof(fc.stringMatching(/^(?:[0-9a-f]{2}){1,3}$/), fc.string({ maxLength: 6 })),
          {
            maxLength: 3,
          },
        ),
      }),
    ),
    post(
      '/v1/tablets/merge',
      fields({
        tablets: fc.array(tablet, { maxLength: 3 }),
        // Short: a merge waits this long for running compactions.
        waitMs: fc.oneof(fc.constantFrom(0, 10), fc.integer({ min: -5, max: 200 }), fc.double()),
      }),
    ),
    post(
      '/v1/tablets/refresh',
      fields({ tablet, tableId: fc.oneof(fc.constantFrom('0001', '0002'), fc.string()) }),
    ),
    post(
      '/v1/ingest',
      fields({
        tablet,
        entries: fc.array(entry, { maxLength: 3 }),
        batch: fc.oneof(fc.ulid(), fc.string({ maxLength: 10 })),
      }),
    ),
    post(
      '/v1/import',
      fields({
        tablet,
        importId: fc.oneof(fc.constantFrom('imp-1'), fc.string({ maxLength: 70 })),
        rows: fc.oneof(fc.constant({}), fc.record({ start: fc.string({ maxLength: 6 }) })),
        files: fc.array(
          fields({
            // Names of the table's imports (missing objects), of others' files, and hostile ones.
            name: fc.oneof(
              fc.ulid().map((u) => `tables/0001/B${u.toUpperCase()}.rf`),
              fc.constantFrom('tables/0002/Bx.rf', '../../etc/passwd', 'tables/0001/I0.rf', ''),
              fc.string({ maxLength: 20 }),
            ),
            entries: numberArb,
            oldestTs: numberArb,
            newestTs: numberArb,
          }),
          { maxLength: 3 },
        ),
      }),
    ),
    post(
      '/v1/scan',
      fields({
        tablet,
        startRow: bytesArb,
        endRow: bytesArb,
        afterRow: bytesArb,
        limit: numberArb,
        filters: fc.array(filterArb, { maxLength: 2 }),
      }),
    ),
    post(
      '/v1/reserve',
      fields({
        tablet,
        queueId: fc.oneof(fc.stringMatching(/^[0-9a-z]{4}$/), fc.string({ maxLength: 5 })),
        compactor,
        requestId: ecid,
      }),
    ),
    post(
      '/v1/commit',
      fields({
        tablet,
        ecid,
        compactor,
        output: fc.oneof(
          fc.constant(null),
          fields({
            size: numberArb,
            entries: numberArb,
            deletes: numberArb,
            oldestTs: numberArb,
            newestTs: numberArb,
          }),
        ),
      }),
    ),
    post(
      '/v1/progress',
      fields({
        tablet,
        ecid,
        compactor,
        progress: fields({
          entriesRead: numberArb,
          entriesWritten: numberArb,
          bytesRead: numberArb,
          bytesWritten: numberArb,
        }),
      }),
    ),
    post(
      '/v1/fail',
      fields({ tablet, ecid, compactor, error: fc.oneof(fc.string(), fc.constant('e'.repeat(5000))) }),
    ),
    post('/v1/release', fields({ tablet, ecid, compactor })),
    post('/v1/cancel', fields({ tablet, ecid })),
    post('/v1/link', fields({ compactor }), true),
  ];
}

/** One request to any route: mostly structured bodies, sometimes any JSON or bytes that are not JSON. */
export function caseArb(k: Known): fc.Arbitrary<Case> {
  const routes = [...managerRoutes(k), ...workerRoutes(k)];
  const structured = fc.oneof(...routes);
  return fc.oneof(
    { weight: 12, arbitrary: structured },
    {
      weight: 1,
      arbitrary: fc.tuple(structured, anyJson).map(([c, body]) => ({ ...c, body, effect: undefined })),
    },
    {
      // A path that does not decode: a stray '%', an escape that is not hex, a cut UTF-8 sequence.
      weight: 1,
      arbitrary: fc
        .tuple(structured, fc.constantFrom('%', '%zz', '%E0%A4', '%C0%AF', '%00', '%2F..%2F'))
        .map(([c, bad]) => {
          const [path, query] = c.path.split('?');
          const mangled = `${path}${bad}${query === undefined ? '' : `?${query}`}`;
          return { ...c, path: mangled, effect: undefined };
        }),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(structured, fc.constantFrom('{', 'nul', '{"a":1}{', '\u0000', '[1,2', '{"__proto__":{"x":1}}'))
        .map(([c, raw]) => ({ ...c, body: undefined, raw, effect: undefined })),
    },
  );
}
