/**
 * `GET /v1/compactions/history`: how compactions ended, from the outcome rows (`~done:<ecid>`) the tablet
 * servers write as they commit or cancel — durable, so it survives any process's restart, and kept for
 * `EXC_OUTCOME_RETENTION_MS`. Newest first, filtered by table, queue and outcome, paged by ecid.
 *
 *   ?since=<ms since the epoch>  only those reserved since then (ecids are ULIDs: they sort by that time)
 *   &table=<name>&queue=<id>&outcome=committed|cancelled&limit=<n>&before=<ecid>
 *
 * The answer counts, over everything the filters select since `since`, how many committed and how many
 * were cancelled for each reason — what an operator asks first ("is anything failing?").
 */
import { encodeTime } from 'ulid';
import { z } from 'zod';
import { DONE_PREFIX, parseOutcome, type HistoryAnswer, type HistoryEntry } from '../meta/outcomes.js';
import { scanAll, type MetaBackend } from '../meta/backend.js';
import type { RpcServer } from '../rpc/server.js';
import { nameSchema } from '../names.js';
import type { Tables } from './tables.js';

const query = z.object({
  // ULIDs hold 48 bits of time: a later `since` cannot be encoded (and would select nothing anyway).
  since: z.coerce
    .number()
    .int()
    .nonnegative()
    .max(2 ** 48 - 1)
    .optional(),
  table: nameSchema('table').optional(),
  queue: z
    .string()
    .regex(/^[0-9a-z]{4}$/, 'a queue id')
    .optional(),
  outcome: z.enum(['committed', 'cancelled']).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).default(100),
  before: z
    .string()
    .regex(/^[0-9A-Z]{26}$/, 'a compaction id')
    .optional(),
});

export function registerHistoryApi(
  server: RpcServer,
  parts: () => { store: MetaBackend; tables: Tables },
): void {
  server.route('GET', '/compactions/history', { query }, async ({ query: q }) => {
    const { store, tables } = parts();
    const tableId = q.table === undefined ? undefined : (await tables.get(q.table)).id; // UNKNOWN_TABLE if not
    const names = new Map((await tables.list()).map((t) => [t.id, t.name]));
    const start = q.since === undefined ? DONE_PREFIX : `${DONE_PREFIX}${encodeTime(q.since, 10)}`;
    let committed = 0;
    // A Map: a reason is stored data, and a plain object would count `constructor` onto its prototype's.
    const cancelled = new Map<string, number>();
    const selected: HistoryEntry[] = [];
    let older = false;
    // One pass over the rows since `since`, oldest first: counts over all of them, the newest `limit`
    // (before `before`) kept.
    for await (const cell of scanAll(store, { prefix: DONE_PREFIX, start })) {
      const o = parseOutcome(cell.value);
      if (!o) continue;
      const ecid = cell.row.slice(DONE_PREFIX.length);
      const table = o.tablet.slice(0, 4);
      if (tableId !== undefined && table !== tableId) continue;
      if (q.queue !== undefined && o.queueId !== q.queue) continue;
      if (q.outcome !== undefined && o.outcome !== q.outcome) continue;
      if (o.outcome === 'committed') committed++;
      else cancelled.set(o.reason ?? 'unknown', (cancelled.get(o.reason ?? 'unknown') ?? 0) + 1);
      if (q.before !== undefined && ecid >= q.before) continue;
      selected.push({ ...o, ecid, table: names.get(table) ?? table });
      if (selected.length > q.limit) {
        selected.shift();
        older = true;
      }
    }
    const outcomes = selected.reverse();
    return {
      outcomes,
      counts: { committed, cancelled: Object.fromEntries(cancelled) },
      next: older ? outcomes[outcomes.length - 1]!.ecid : null,
    } satisfies HistoryAnswer;
  });
}
