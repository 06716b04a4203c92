/**
 * The manager's API for the shape of a table's tablets (DESIGN.md, "Tablet splits", "Tablet merges"):
 *
 *   POST /v1/tables/:name/split   { rows?: string[], rowsHex?: string[] }
 *   POST /v1/tables/:name/merge   { startRow?, endRow?, startRowHex?, endRowHex? }   (merges.ts)
 *   POST /v1/tables/:name/offline, /online                                  (table-offline.ts)
 *
 * A split is made by the tablet server hosting the tablet (tserver/tablet-splits.ts), which decides it
 * from its copy of the tablet like every other change; the manager finds, for each row, the tablet it
 * falls in and asks its host, following tablets that move or are not hosted yet, until every row is a
 * split point or `SPLIT_WAIT_MS` has passed. A row that already is a split point is no error, so a
 * request repeated after a lost answer splits nothing twice.
 */
import { z } from 'zod';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { compareBytes } from '../storage/index.js';
import type { TabletMeta } from '../meta/tablet.js';
import type { PeerClients } from '../rpc/peers.js';
import type { RpcServer } from '../rpc/server.js';
import { nameSchema } from '../names.js';
import { showRow } from '../row-text.js';
import { backoffDelay, sleep } from '../retry.js';
import { parseInput } from '../validate.js';
import { HEX_ROW, rowOf } from './row-params.js';
import { mergeTable, type MergeParts } from './merges.js';
import { requestIdOf } from './requests.js';
import { bringOnline, takeOffline, type OfflineParts } from './table-offline.js';
import type { Tables } from './tables.js';

export interface TabletAdminParts extends OfflineParts {
  tables: Tables;
  peers: PeerClients;
  log: Logger;
  merging: MergeParts;
}

/** How long a split waits for the tablets to be hosted (and for their hosts to answer). */
export const SPLIT_WAIT_MS = 30_000;
const MAX_ROWS = 1_000;

const rowsSchema = z.object({
  /** Rows as UTF-8 text. */
  rows: z.array(z.string().min(1)).max(MAX_ROWS).default([]),
  /** Rows as bytes in hex (binary rows; what the CLI sends). */
  rowsHex: z
    .array(z.string().regex(/^(?:[0-9a-f]{2})+$/, 'expected a non-empty lower-case hex byte string'))
    .max(MAX_ROWS)
    .default([]),
});

export interface SplitTableAnswer {
  table: string;
  /** The rows that became split points now, and those that were already (hex). */
  splitAt: string[];
  already: string[];
  tablets: number;
}

export function registerTabletAdminApi(server: RpcServer, parts: () => TabletAdminParts): void {
  server.route('POST', '/tables/:name/split', { body: rowsSchema }, async ({ params, body }) => {
    const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
    if (body.rows.length > 0 && body.rowsHex.length > 0)
      throw new ExcError('BAD_REQUEST', 'give rows or rowsHex, not both', {
        details: { field: 'body.rows' },
      });
    const rows =
      body.rowsHex.length > 0
        ? body.rowsHex.map((h) => Buffer.from(h, 'hex'))
        : body.rows.map((r) => Buffer.from(r, 'utf8'));
    if (rows.length === 0)
      throw new ExcError('BAD_REQUEST', 'no row to split at', { details: { field: 'body.rows' } });
    return splitTable(parts(), name, rows);
  });

  server.route(
    'POST',
    '/tables/:name/merge',
    {
      body: z.object({
        startRow: z.string().optional(),
        endRow: z.string().optional(),
        startRowHex: HEX_ROW.optional(),
        endRowHex: HEX_ROW.optional(),
      }),
    },
    async ({ params, body }) => {
      const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
      const start = rowOf(body.startRow, body.startRowHex, 'startRow');
      const end = rowOf(body.endRow, body.endRowHex, 'endRow');
      if (start && end && compareBytes(start, end) > 0)
        throw new ExcError(
          'BAD_REQUEST',
          `the start row ${showRow(start)} is after the end row ${showRow(end)}`,
        );
      return mergeTable(parts().merging, name, start, end);
    },
  );

  server.route('POST', '/tables/:name/offline', {}, async ({ params, query }) => {
    const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
    return takeOffline(parts(), name, requestIdOf(query));
  });

  server.route('POST', '/tables/:name/online', {}, async ({ params, query }) => {
    const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
    return bringOnline(parts(), name, requestIdOf(query));
  });
}

/** Makes every one of `rows` a split point of table `name` (see the module comment). */
export async function splitTable(
  p: TabletAdminParts,
  name: string,
  rows: Buffer[],
): Promise<SplitTableAnswer> {
  const table = await p.tables.getOnline(name);
  const wanted = unique(rows);
  const endsAtFirst = new Set(
    (await p.tables.tablets(table.id)).flatMap((t) => (t.endRow ? [hexOf(t.endRow)] : [])),
  );
  const deadline = Date.now() + SPLIT_WAIT_MS;
  let lastError: unknown;
  for (let attempt = 0; ; attempt++) {
    const tablets = await p.tables.tablets(table.id);
    const ends = new Set(tablets.flatMap((t) => (t.endRow ? [hexOf(t.endRow)] : [])));
    const left = wanted.filter((r) => !ends.has(hexOf(r)));
    if (left.length === 0) {
      return {
        table: name,
        splitAt: wanted.filter((r) => !endsAtFirst.has(hexOf(r))).map(hexOf),
        already: wanted.filter((r) => endsAtFirst.has(hexOf(r))).map(hexOf),
        tablets: tablets.length,
      };
    }
    if (Date.now() > deadline) {
      throw new ExcError(
        'UNAVAILABLE',
        `could not split ${name} at ${left.map(showRow).join(', ')} within ${SPLIT_WAIT_MS / 1000} s: ${lastError ? describeError(lastError) : 'its tablets are not hosted'}`,
        { details: { table: name } },
      );
    }
    let asked = 0;
    let split = 0;
    for (const [tablet, at] of byTablet(tablets, left)) {
      if (!tablet.loc) continue; // not hosted yet: the assigner will place it
      asked++;
      try {
        await p.peers
          .get(tablet.loc.server)
          .post(
            '/v1/tablets/split',
            { tablet: tablet.row, rowsHex: at.map(hexOf) },
            { idempotent: true, attempts: 1, timeoutMs: 10_000 },
          );
        split++;
        p.log.info({ table: name, tablet: tablet.row, rows: at.length }, 'tablet split on request');
      } catch (err) {
        lastError = err; // moved, restarting, or busy: read the tablets again and go on
      }
    }
    // Every host split what it was asked: read the tablets again at once; otherwise wait a little first.
    if (asked === 0 || split < asked) await sleep(backoffDelay(attempt, { baseMs: 50, maxMs: 1_000 }));
  }
}

/** The rows of `rows` grouped by the tablet they fall in (tablets in row order, the last unbounded). */
function byTablet(tablets: readonly TabletMeta[], rows: readonly Buffer[]): Map<TabletMeta, Buffer[]> {
  const out = new Map<TabletMeta, Buffer[]>();
  for (const row of rows) {
    const t = tablets.find((x) => x.endRow === null || compareBytes(row, x.endRow) <= 0);
    if (!t) continue;
    out.set(t, [...(out.get(t) ?? []), row]);
  }
  return out;
}

function unique(rows: readonly Buffer[]): Buffer[] {
  const sorted = [...rows].sort(compareBytes);
  return sorted.filter((r, i) => i === 0 || compareBytes(r, sorted[i - 1]!) !== 0);
}

const hexOf = (row: Buffer): string => row.toString('hex');
