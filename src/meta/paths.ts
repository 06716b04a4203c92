/**
 * Names of tablet files in the object store. Every file of a table lives under `tables/<tableId>/`, which
 * is the prefix the garbage collector sweeps; names are ULIDs, so a name is never reused (the collector
 * relies on that: a name that was unreferenced once stays unreferenced).
 *
 *   tables/<tableId>/I<ulid>.rf   written by an ingest
 *   tables/<tableId>/C<ulid>.rf   the output of a compaction
 */
import { ulid } from '../ids.js';

export const TABLES_PREFIX = 'tables/';

export type FileKind = 'ingest' | 'compaction';

export function newFileName(tableId: string, kind: FileKind): string {
  return `${TABLES_PREFIX}${tableId}/${kind === 'ingest' ? 'I' : 'C'}${ulid()}.rf`;
}
