/**
 * The manager's API for asking user compactions (`excompact admin table compact`):
 *
 *   POST /v1/tables/:name/compact            { startRow?, endRow?, startRowHex?, endRowHex?, filters?, queue?,
 *                                              select? }
 *   GET  /v1/tables/:name/compactions/:id    which of its tablets it is still pending on
 *
 * A request writes `compact:<id>` (and its id in `requests`) on every tablet overlapping the range, and its
 * record (`~ucomp:<id>`), in one submission carrying the request's answer: a request repeated after a lost
 * answer is the same compaction, asked once. The tablet servers select and run it (queue/selection.ts);
 * where it stands in detail is `GET /v1/user-compactions/:id` (user-compaction-api.ts).
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { HEX_ROW, rowOf } from './row-params.js';
import { ulid } from '../ids.js';
import { selectorsSchema, showSelector } from '../meta/selectors.js';
import { COL_PREV, COL_REQUESTS, compactCol, prevValue, type TabletMeta } from '../meta/tablet.js';
import type { Condition, Mutation } from '../meta/types.js';
import {
  cancelledTablets,
  COL_REQUEST,
  userCompactionRow,
  type UserCompactionRecord,
} from '../meta/user-compactions.js';
import { resolveQueue } from '../queue/registry.js';
import type { RpcServer } from '../rpc/server.js';
import { validateFilters } from '../storage/index.js';
import { nameSchema } from '../names.js';
import { showRow } from '../row-text.js';
import { LONE_SURROGATE, parseInput, wellFormed } from '../validate.js';
import type { AdminParts } from './admin-api.js';
import { overlaps } from './merges.js';
import { answerCell, answerOf, requestIdOf, unanswered } from './requests.js';

const tableNameParam = z.object({ name: nameSchema('table') });

/**
 * The tablets that took a request in place of those that changed shape before it landed: a tablet read
 * before a split or merge that committed first would have taken it on its row alone — the part that kept
 * the row — and the rest of its rows would never be compacted. `changed` are the tablets whose put did
 * not apply; the tablets `read` gives now (those of the request's rows that do not hold it) that share
 * rows with them are asked in turn (`ask`: whether each applied), until none changed again. Resolves with
 * the tablets that took it.
 */
export async function askChanged(
  changed: TabletMeta[],
  read: () => Promise<TabletMeta[]>,
  ask: (tablets: TabletMeta[]) => Promise<boolean[]>,
): Promise<TabletMeta[]> {
  const took: TabletMeta[] = [];
  for (let round = 0; changed.length > 0; round++) {
    if (round === 20)
      throw new ExcError(
        'UNAVAILABLE',
        'the tablets kept changing shape while the compaction was asked; ask again',
        {
          details: { tablets: changed.map((t) => t.row) },
        },
      );
    const again = (await read()).filter((t) => changed.some((c) => sharesRows(t, c)));
    const applied = again.length === 0 ? [] : await ask(again);
    took.push(...again.filter((_, i) => applied[i]));
    changed = again.filter((_, i) => !applied[i]);
  }
  return took;
}

/** Whether two tablets hold a row in common ((prev, end] each). */
function sharesRows(a: TabletMeta, b: TabletMeta): boolean {
  const before = (end: Buffer | null, prev: Buffer | null) =>
    end !== null && prev !== null && Buffer.compare(end, prev) <= 0;
  return !before(a.endRow, b.prevEndRow) && !before(b.endRow, a.prevEndRow);
}

interface UserCompaction {
  id: string;
  table: string;
  tablets: string[];
}

export function registerUserCompactionRequests(server: RpcServer, parts: () => AdminParts): void {
  server.route(
    'POST',
    '/tables/:name/compact',
    {
      body: z.object({
        startRow: z.string().refine(wellFormed, LONE_SURROGATE).optional(),
        endRow: z.string().refine(wellFormed, LONE_SURROGATE).optional(),
        /** The same rows as bytes in hex (binary rows; what the CLI sends). */
        startRowHex: HEX_ROW.optional(),
        endRowHex: HEX_ROW.optional(),
        filters: z.unknown().optional(),
        /** The queue its jobs go to whatever their size (absent: the table's routes). */
        queue: nameSchema('queue').optional(),
        /** Which files of each tablet it rewrites (meta/selectors.ts; absent: every file). */
        select: selectorsSchema.optional(),
      }),
    },
    async ({ params, body, query }) => {
      const p = parts();
      const { name } = parseInput(tableNameParam, params, 'path');
      const requestId = requestIdOf(query);
      const answered = await answerOf<UserCompaction>(p.store, requestId);
      if (answered) return answered;
      const table = await p.tables.get(name);
      const filters = body.filters === undefined ? [] : validateFilters(body.filters);
      // `all` chooses what no selector does: left out, so the request coalesces with those without any.
      const select = (body.select ?? []).filter((s) => s.name !== 'all');
      if (select.length > 0 && filters.length > 0)
        // A filter drops entries of the files rewritten only: older versions in the files a selector
        // left alone would show again where it dropped newer ones.
        throw new ExcError(
          'BAD_REQUEST',
          'filters and selectors cannot be combined: a filter applied to some files only would let older versions in the others show again',
        );
      // UNKNOWN_QUEUE for a queue that does not exist (one deleted later leaves the request pending).
      const queue =
        body.queue === undefined ? undefined : (await resolveQueue(p.session, p.layout, body.queue)).name;
      const start = rowOf(body.startRow, body.startRowHex, 'startRow');
      const end = rowOf(body.endRow, body.endRowHex, 'endRow');
      if (start && end && Buffer.compare(start, end) > 0)
        throw new ExcError(
          'BAD_REQUEST',
          `the start row ${showRow(start)} is after the end row ${showRow(end)}`,
        );
      // The request id names the compaction: a repeat is the same compaction, requested once.
      const id = requestId ?? ulid();
      const requestedAt = Date.now();
      const kind = { ...(queue ? { queue } : {}), ...(select.length > 0 ? { select } : {}) };
      const request = JSON.stringify({ requestedAt, filters, ...kind });
      const chosen = (await p.tables.tablets(table.id)).filter((t) => overlaps(t, start, end));
      const answer: UserCompaction = { id, table: name, tablets: chosen.map((t) => t.row) };
      const ask = (t: TabletMeta, conditions: Condition[]): Mutation => ({
        // On the tablet as read: one that split or merged since is asked again as what it became.
        conditions: [
          ...conditions,
          { op: 'equals', row: t.row, col: COL_PREV, value: prevValue(t.prevEndRow) },
        ],
        // With the request, its id in `requests`: a split or merge decided without it is refused.
        puts: [
          { row: t.row, col: compactCol(id), value: request },
          { row: t.row, col: COL_REQUESTS, value: id },
        ],
      });
      const firstRound = requestId ? [unanswered(requestId)] : [];
      const mutations: Mutation[] = chosen.map((t) => ask(t, firstRound));
      // Its record, to follow it by id later (admin compactions status); with the answer when there is one.
      const record: UserCompactionRecord = {
        tableId: table.id,
        table: name,
        tablets: answer.tablets,
        filters,
        requestedAt,
        ...kind,
      };
      const recordCells = () => [
        ...(requestId ? [answerCell(requestId, answer)] : []),
        { row: userCompactionRow(id), col: COL_REQUEST, value: JSON.stringify(record) },
      ];
      mutations.push({ conditions: firstRound, puts: recordCells() });
      const results = await p.commits.submit({ mutations });
      if (requestId && !results.at(-1)?.applied) return await answerOf<UserCompaction>(p.store, requestId);
      const asked = await askChanged(
        chosen.filter((_, i) => !results[i]?.applied),
        async () =>
          (await p.tables.tablets(table.id)).filter(
            (t) => overlaps(t, start, end) && !t.userCompactions.has(id),
          ),
        async (tablets) =>
          (await p.commits.submit({ mutations: tablets.map((t) => ask(t, [])) })).map((r) => r.applied),
      );
      answer.tablets = [
        ...chosen.filter((_, i) => results[i]?.applied).map((t) => t.row),
        ...asked.map((t) => t.row),
      ];
      if (asked.length > 0 || answer.tablets.length < chosen.length) {
        record.tablets = answer.tablets;
        await p.commits.submit({ mutations: [{ puts: recordCells() }] });
      }
      for (const row of answer.tablets) p.notifyTservers({ tablet: row });
      p.log.info(
        {
          table: name,
          id,
          tablets: answer.tablets.length,
          filters: filters.map((f) => f.name),
          queue,
          select: select.map(showSelector),
        },
        'user compaction requested',
      );
      return answer;
    },
  );

  server.route('GET', '/tables/:name/compactions/:id', {}, async ({ params }) => {
    const p = parts();
    const { name, id } = parseInput(
      z.object({
        name: nameSchema('table'),
        id: z.string().regex(/^[0-9A-Z]{26}$/, 'expected a compaction id'),
      }),
      params,
      'path',
    );
    const table = await p.tables.get(name);
    const pending = (await p.tables.tablets(table.id)).filter((t) => t.userCompactions.has(id));
    const cancelled = [...cancelledTablets(await p.store.row(userCompactionRow(id))).keys()];
    return { id, table: name, remaining: pending.map((t) => t.row), cancelled, done: pending.length === 0 };
  });
}
