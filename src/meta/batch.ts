/**
 * A batch of conditional mutations decided in memory (backend.ts gives the semantics): from the cells
 * its conditions read, as they were when the transaction began, to each mutation's result and the net
 * change to write. A backend that cannot afford a round trip per condition (PostgreSQL: the database is
 * across the network) reads those cells in one query, decides here, and writes the net change in a few
 * statements, all in the transaction that holds the epoch lock, so nothing changes underneath.
 */
import { prefixEnd } from './keys.js';
import type { Condition, MutationResult, ParsedMutation } from './types.js';

/** What the conditions of a batch read. */
export interface BatchReads {
  /** (row, col) of every equals/absent/present condition. */
  cells: { row: string; col: string }[];
  /** (row, prefix) of every noColumnWithPrefix condition. */
  prefixes: { row: string; prefix: string }[];
}

/** The cells as they were: values by (row, col), and the columns of each (row, prefix) read. */
export interface BaseState {
  value(row: string, col: string): string | undefined;
  /** Every column of `row` that starts with `prefix`. */
  columns(row: string, prefix: string): readonly string[];
}

/** The net change of the applied mutations: wipe these rows first, then put and delete these cells. */
export interface NetChange {
  wipedRows: string[];
  puts: { row: string; col: string; value: string }[];
  deletes: { row: string; col: string }[];
}

export function batchReads(mutations: readonly ParsedMutation[]): BatchReads {
  const cells = new Map<string, { row: string; col: string }>();
  const prefixes = new Map<string, { row: string; prefix: string }>();
  for (const m of mutations) {
    for (const c of m.conditions) {
      if (c.op === 'noColumnWithPrefix') prefixes.set(key(c.row, c.prefix), { row: c.row, prefix: c.prefix });
      else cells.set(key(c.row, c.col), { row: c.row, col: c.col });
    }
  }
  return { cells: [...cells.values()], prefixes: [...prefixes.values()] };
}

export function decideBatch(
  mutations: readonly ParsedMutation[],
  base: BaseState,
): { results: MutationResult[]; change: NetChange } {
  // Changes so far, over the base: a wiped row hides every base cell of it; `cells` then holds the
  // row's later puts (a value) and deletes (null).
  const wiped = new Set<string>();
  const cells = new Map<string, { row: string; col: string; value: string | null }>();
  const value = (row: string, col: string): string | null => {
    const changed = cells.get(key(row, col));
    if (changed) return changed.value;
    return wiped.has(row) ? null : (base.value(row, col) ?? null);
  };
  const firstColumn = (row: string, prefix: string): string | null => {
    const end = prefixEnd(prefix);
    const within = (col: string) => col >= prefix && (end === undefined || col < end);
    let first: string | null = null;
    const consider = (col: string) => {
      if (first === null || col < first) first = col;
    };
    // The base's columns exist unless changed since (a wiped row has none left); changed ones by value.
    if (!wiped.has(row)) {
      for (const col of base.columns(row, prefix)) if (!cells.has(key(row, col))) consider(col);
    }
    for (const c of cells.values()) if (c.row === row && c.value !== null && within(c.col)) consider(c.col);
    return first;
  };
  const evaluate = (c: Condition): { holds: boolean; value: string | null } => {
    if (c.op === 'noColumnWithPrefix') {
      const found = firstColumn(c.row, c.prefix);
      return { holds: found === null, value: found };
    }
    const v = value(c.row, c.col);
    switch (c.op) {
      case 'equals':
        return { holds: v === c.value, value: v };
      case 'absent':
        return { holds: v === null, value: v };
      case 'present':
        return { holds: v !== null, value: v };
    }
  };

  const results: MutationResult[] = [];
  for (const m of mutations) {
    let failed: MutationResult | undefined;
    for (const [index, condition] of m.conditions.entries()) {
      const actual = evaluate(condition);
      if (!actual.holds) {
        failed = { applied: false, failed: { index, condition, actual: actual.value } };
        break;
      }
    }
    if (failed) {
      results.push(failed);
      continue;
    }
    for (const d of m.deletes) cells.set(key(d.row, d.col), { row: d.row, col: d.col, value: null });
    for (const row of m.deleteRows) {
      wiped.add(row);
      for (const [k, c] of cells) if (c.row === row) cells.delete(k);
    }
    for (const p of m.puts) cells.set(key(p.row, p.col), { row: p.row, col: p.col, value: p.value });
    results.push({ applied: true });
  }
  const change: NetChange = { wipedRows: [...wiped], puts: [], deletes: [] };
  for (const c of cells.values()) {
    if (c.value === null) change.deletes.push({ row: c.row, col: c.col });
    else change.puts.push({ row: c.row, col: c.col, value: c.value });
  }
  return { results, change };
}

/** Rows and columns are printable ASCII: a newline cannot occur in either. */
const key = (row: string, col: string): string => `${row}\n${col}`;
