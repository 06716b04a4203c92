/**
 * A table's summaries (`excompact admin table summaries`; DESIGN.md, "Summaries"), from the figures every
 * file record holds (meta/file-stats.ts) — no file is read:
 *
 *   GET /v1/tables/:name/summaries?startRowHex=&endRowHex=    the tablets overlapping [start, end]
 *
 * The counts are those of the entries stored, hidden versions and delete markers included (what a
 * compaction of everything would start from). They are exact for the files of the tablets wholly inside
 * the range whose records hold the whole file; the answer names the rest: tablets that reach beyond the
 * range (counted whole), files whose record is a share estimated in proportion to bytes (a file shared
 * after a split), and files written before statistics were recorded (in bytes and entries only).
 */
import { z } from 'zod';
import { joinFamilies } from '../meta/file-stats.js';
import { rowsOf, type TabletMeta } from '../meta/tablet.js';
import { coversRows, type HexRange } from '../meta/rows.js';
import type { RpcServer } from '../rpc/server.js';
import { nameSchema } from '../names.js';
import { showRow } from '../row-text.js';
import { parseInput } from '../validate.js';
import type { AdminParts } from './admin-api.js';
import { overlaps } from './merges.js';
import { HEX_ROW, rowOf } from './row-params.js';

export interface TableSummary {
  table: string;
  tablets: number;
  /** Files counted (a file shared by several tablets once per tablet: each holds its share). */
  files: number;
  bytes: number;
  entries: number;
  deletes: number;
  keyBytes: number;
  valueBytes: number;
  /** The oldest and newest timestamp of the entries (null: no file records them). */
  oldestTs: number | null;
  newestTs: number | null;
  /** Entries per family (as `showRow` prints it), by family; each file names up to 16. */
  families: [string, number][];
  /** Entries of families the files did not name one by one. */
  otherFamilies: number;
  /** Every count above is exact for the range (the families beyond 16 in a file are only counted together). */
  exact: boolean;
  /** Tablets that hold rows outside the range: counted whole (their end rows, as `showRow` prints them). */
  beyondRange: string[];
  /** Files whose counts in a tablet are a share estimated in proportion to bytes. */
  estimated: string[];
  /** Files without statistics: counted in bytes and entries only. */
  withoutStats: string[];
}

/** The summary of `tablets` (a table's, in row order) for the rows [start, end] (inclusive; undefined: unbounded). */
export function summarize(
  table: string,
  tablets: readonly TabletMeta[],
  start?: Buffer,
  end?: Buffer,
): TableSummary {
  const chosen = tablets.filter((t) => overlaps(t, start, end));
  // [start, end] as [start, end 00).
  const range: HexRange = {
    ...(start && start.length > 0 ? { start: start.toString('hex') } : {}),
    ...(end ? { end: `${end.toString('hex')}00` } : {}),
  };
  const out: TableSummary = {
    table,
    tablets: chosen.length,
    files: 0,
    bytes: 0,
    entries: 0,
    deletes: 0,
    keyBytes: 0,
    valueBytes: 0,
    oldestTs: null,
    newestTs: null,
    families: [],
    otherFamilies: 0,
    exact: true,
    beyondRange: [],
    estimated: [],
    withoutStats: [],
  };
  const estimated = new Set<string>();
  const withoutStats = new Set<string>();
  const families: { families: [string, number][]; otherFamilies: number }[] = [];
  for (const t of chosen) {
    if ((start || end) && !coversRows(range, rowsOf(t))) out.beyondRange.push(endRowText(t));
    for (const [name, f] of t.files) {
      out.files++;
      out.bytes += f.size;
      out.entries += f.entries;
      if (f.estimated || f.fence) estimated.add(name);
      if (f.deletes === undefined || f.families === undefined || f.keyBytes === undefined) {
        withoutStats.add(name);
        continue;
      }
      out.deletes += f.deletes;
      out.keyBytes += f.keyBytes;
      out.valueBytes += f.valueBytes ?? 0;
      families.push({ families: f.families, otherFamilies: f.otherFamilies ?? 0 });
      if (f.oldestTs !== undefined) out.oldestTs = Math.min(out.oldestTs ?? Infinity, f.oldestTs);
      if (f.newestTs !== undefined) out.newestTs = Math.max(out.newestTs ?? -Infinity, f.newestTs);
    }
  }
  const joined = joinFamilies(families, Infinity);
  out.families = joined.families.map(([hex, n]) => [showRow(Buffer.from(hex, 'hex')), n]);
  out.otherFamilies = joined.otherFamilies;
  out.estimated = [...estimated].sort();
  out.withoutStats = [...withoutStats].sort();
  out.exact = out.beyondRange.length === 0 && out.estimated.length === 0 && out.withoutStats.length === 0;
  return out;
}

function endRowText(t: TabletMeta): string {
  return t.endRow ? showRow(t.endRow) : '(last)';
}

export function registerSummariesApi(server: RpcServer, parts: () => AdminParts): void {
  server.route(
    'GET',
    '/tables/:name/summaries',
    { query: z.object({ startRowHex: HEX_ROW.optional(), endRowHex: HEX_ROW.optional() }) },
    async ({ params, query }) => {
      const p = parts();
      const { name } = parseInput(z.object({ name: nameSchema('table') }), params, 'path');
      const table = await p.tables.get(name);
      const start = rowOf(undefined, query.startRowHex, 'startRow');
      const end = rowOf(undefined, query.endRowHex, 'endRow');
      return summarize(name, await p.tables.tablets(table.id), start, end);
    },
  );
}
