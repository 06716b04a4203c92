/**
 * Balancing (DESIGN.md, "Moves and balancing"), as a pure function: where the manager moves tablets. The
 * assigner (assignment.ts) carries the moves out, a few at a time; a move cancels nothing (the new host
 * loads the tablet with its reservations), so any tablet may move.
 *
 * 1. Drained servers (an admin's drain, or a tablet server stopping) give up every tablet, to the
 *    eligible server with the fewest tablets (then the fewest bytes).
 * 2. Each table's tablets are spread over the eligible servers by count: while one server holds two more
 *    of a table's tablets than another, one moves from the first to the second — the one whose bytes
 *    bring the two servers' bytes nearest to even (then the one with the fewest reservations).
 * Moves already under way count for their destination. At most `maxMoves` are planned.
 */
import { TABLE_PREFIX, isTabletRow } from '../meta/keys.js';
import { COL_FUTURE, COL_LOC, COL_PREV } from '../meta/tablet.js';
import type { RowChange } from './commit-queue.js';
import { TSERVER_PREFIX } from './drains.js';

export interface PlacedTablet {
  row: string;
  tableId: string;
  server: string;
  bytes: number;
  reservations: number;
}

export interface BalanceInput {
  /** Hosted tablets that are not moving. */
  tablets: readonly PlacedTablet[];
  /** Tablets moving now, with where to: counted there. */
  moving: readonly (Pick<PlacedTablet, 'tableId' | 'bytes'> & { to: string })[];
  /** Servers that may take tablets: live, not drained. */
  eligible: readonly string[];
  /** Live servers whose tablets must all move. */
  drained: ReadonlySet<string>;
  maxMoves: number;
}

export interface Move {
  tablet: string;
  from: string;
  to: string;
}

export function planMoves(input: BalanceInput): Move[] {
  const { eligible, drained, maxMoves } = input;
  if (eligible.length === 0 || maxMoves <= 0) return [];
  const bytes = new Map<string, number>(eligible.map((s) => [s, 0]));
  const count = new Map<string, number>(eligible.map((s) => [s, 0]));
  const perTable = new Map<string, Map<string, number>>();
  const tableCount = (tableId: string, server: string): number => perTable.get(tableId)?.get(server) ?? 0;
  const place = (t: Pick<PlacedTablet, 'tableId' | 'bytes'>, server: string, sign: 1 | -1): void => {
    if (!bytes.has(server)) return;
    bytes.set(server, bytes.get(server)! + sign * t.bytes);
    count.set(server, count.get(server)! + sign);
    const table = perTable.get(t.tableId) ?? new Map<string, number>();
    table.set(server, (table.get(server) ?? 0) + sign);
    perTable.set(t.tableId, table);
  };
  for (const t of input.tablets) place(t, t.server, 1);
  for (const m of input.moving) place(m, m.to, 1);
  const moves: Move[] = [];
  const move = (t: PlacedTablet, to: string): void => {
    moves.push({ tablet: t.row, from: t.server, to });
    place(t, t.server, -1);
    place(t, to, 1);
  };
  const fewest = (tableId?: string): string =>
    [...eligible].sort(
      (a, b) =>
        (tableId === undefined ? 0 : tableCount(tableId, a) - tableCount(tableId, b)) ||
        count.get(a)! - count.get(b)! ||
        bytes.get(a)! - bytes.get(b)! ||
        (a < b ? -1 : 1),
    )[0]!;

  // 1. Drained servers empty first, the quietest tablets first.
  const leaving = input.tablets
    .filter((t) => drained.has(t.server))
    .sort((a, b) => a.reservations - b.reservations || a.bytes - b.bytes || (a.row < b.row ? -1 : 1));
  for (const t of leaving) {
    if (moves.length >= maxMoves) return moves;
    move(t, fewest(t.tableId));
  }

  // 2. Each table's tablets by count, over the eligible servers.
  const moved = new Set(moves.map((m) => m.tablet));
  const tables = [...new Set(input.tablets.map((t) => t.tableId))].sort();
  for (const tableId of tables) {
    for (;;) {
      if (moves.length >= maxMoves) return moves;
      const order = [...eligible].sort(
        (a, b) => tableCount(tableId, a) - tableCount(tableId, b) || bytes.get(a)! - bytes.get(b)!,
      );
      const lo = order[0]!;
      const hi = order[order.length - 1]!;
      if (tableCount(tableId, hi) - tableCount(tableId, lo) <= 1) break;
      const gap = (bytes.get(hi)! - bytes.get(lo)!) / 2;
      const candidates = input.tablets.filter(
        (t) => t.tableId === tableId && t.server === hi && !moved.has(t.row),
      );
      if (candidates.length === 0) break;
      candidates.sort(
        (a, b) =>
          Math.abs(a.bytes - gap) - Math.abs(b.bytes - gap) ||
          a.reservations - b.reservations ||
          (a.row < b.row ? -1 : 1),
      );
      const chosen = candidates[0]!;
      moved.add(chosen.row);
      move(chosen, lo);
    }
  }
  return moves;
}

/**
 * Whether a changed row can change what a pass does: placement, tablets and tables, drains. A whole row
 * deleted counts only when it is a tablet's (a merge): the queue entries a reservation takes and the
 * outcome rows the manager trims are deleted whole too, and a pass after each reads every tablet.
 */
export function affectsPlacement(change: RowChange): boolean {
  if (change.row.startsWith(TABLE_PREFIX) || change.row.startsWith(TSERVER_PREFIX)) return true;
  if (!isTabletRow(change.row)) return false;
  return change.cols.some((c) => c === COL_LOC || c === COL_FUTURE || c === COL_PREV || c === '*');
}

/** The server with the fewest tablets (then the first by name). */
export function leastLoaded(load: Map<string, number>): string | undefined {
  let best: string | undefined;
  for (const [server, n] of load) {
    if (best === undefined || n < load.get(best)! || (n === load.get(best) && server < best)) best = server;
  }
  return best;
}

/** Counts `rows` pinned in `pinned` until the function returned is called (once; later calls do nothing). */
export function pinRows(pinned: Map<string, number>, rows: readonly string[]): () => void {
  for (const r of rows) pinned.set(r, (pinned.get(r) ?? 0) + 1);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    for (const r of rows) {
      const n = (pinned.get(r) ?? 1) - 1;
      if (n <= 0) pinned.delete(r);
      else pinned.set(r, n);
    }
  };
}

/**
 * When the next backstop pass is due after one that read `tablets`: `configuredMs`, or later, so that
 * reading every tablet averages at most 500 tablets a second (every 200 s at 100,000).
 */
export function backstopAfter(configuredMs: number, tablets: number): number {
  return Math.max(configuredMs, tablets * 2);
}
