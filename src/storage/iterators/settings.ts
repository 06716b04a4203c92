import { z } from 'zod';
import { parseInput } from '../../validate.js';
import { MAX_TIMESTAMP } from '../key.js';
import { compileFilters, validateFilters, type EntryPredicate, type FilterSpec } from './filters.js';
import { validateTableIterators, type TableIterator } from '../../table-iterators.js';
import { compileTableIterators, type CompiledTableIterators } from './table-iterators.js';

/** What a merge keeps; see stack.ts for the exact rules and their order. */
export interface IteratorSettings {
  /** Keep the N newest live versions of a cell; N >= 1 (a table setting, default 1). */
  versions: number;
  /** Age-off: drop puts with timestamp < nowMs - ttlMs. None when absent. */
  ttlMs?: number | undefined;
  /** Reference time, fixed by the caller (the reservation), so that a compaction is deterministic. */
  nowMs: number;
  filters: FilterSpec[];
  /** True for a compaction of ALL the tablet's files and for scans; false for a partial compaction. */
  dropDeletes: boolean;
  /** The table's iterators (table-iterators.ts), as the reservation or scan fixed them. */
  table?: TableIterator[] | undefined;
}

export const DEFAULT_VERSIONS = 1;

/** The wire form of IteratorSettings, for request validation (`versions` and `filters` may be left out). */
export const iteratorSettingsSchema = z.strictObject({
  versions: z.number().int().min(1).max(1_000_000).default(DEFAULT_VERSIONS),
  ttlMs: z.number().int().min(0).max(MAX_TIMESTAMP).optional(),
  nowMs: z.number().int().min(0).max(MAX_TIMESTAMP),
  filters: z.array(z.unknown()).default([]),
  dropDeletes: z.boolean(),
  table: z.array(z.unknown()).optional(),
});

/** Checks settings from a request or a caller; throws BAD_REQUEST naming the bad field or filter. */
export function validateIteratorSettings(value: unknown): IteratorSettings {
  const s = parseSettings(value);
  return {
    versions: s.versions,
    ttlMs: s.ttlMs,
    nowMs: s.nowMs,
    filters: validateFilters(s.filters),
    dropDeletes: s.dropDeletes,
    ...(s.table === undefined ? {} : { table: validateTableIterators(s.table) }),
  };
}

/**
 * Settings in the form the stack runs on. Only {@link compileSettings} makes them, so a stack given
 * CompiledSettings never checks them again.
 */
export interface CompiledSettings {
  versions: number;
  /** Puts with a timestamp below this are aged off (-1: no age-off). */
  cutoff: number;
  filter: EntryPredicate | null;
  dropDeletes: boolean;
  /** The table's iterators, compiled (null: none); nowMs is their age-offs' reference. */
  table: CompiledTableIterators | null;
  nowMs: number;
  /** Whether combined cells are combined: in scans and compactions that drop deletes (table-iterators.ts). */
  combine: boolean;
}

/**
 * Checks settings as validateIteratorSettings does (BAD_REQUEST naming the bad field or filter) and
 * compiles them, in one pass: the one check a compaction or scan makes, at its entry point.
 */
export function compileSettings(value: IteratorSettings): CompiledSettings {
  const s = parseSettings(value);
  return {
    versions: s.versions,
    cutoff: s.ttlMs === undefined ? -1 : s.nowMs - s.ttlMs,
    filter: compileFilters(s.filters),
    dropDeletes: s.dropDeletes,
    table: s.table === undefined ? null : compileTableIterators(validateTableIterators(s.table)),
    nowMs: s.nowMs,
    combine: s.dropDeletes,
  };
}

function parseSettings(value: unknown): z.output<typeof iteratorSettingsSchema> {
  return parseInput(iteratorSettingsSchema, value, 'iterator settings');
}
