/**
 * Names of tablet files in the object store. Every file of a table lives under `tables/<tableId>/`, which
 * is the prefix the garbage collector sweeps; names are ULIDs, so a name is never reused (the collector
 * relies on that: a name that was unreferenced once stays unreferenced).
 *
 *   tables/<tableId>/I<ulid>.rf   written by an ingest
 *   tables/<tableId>/C<ulid>.rf   the output of a compaction
 *   tables/<tableId>/B<ulid>.rf   a file of a bulk import, uploaded by `excompact import`
 */
import { ulid } from '../ids.js';

export const TABLES_PREFIX = 'tables/';

export type FileKind = 'ingest' | 'compaction' | 'import';

const LETTER: Record<FileKind, string> = { ingest: 'I', compaction: 'C', import: 'B' };

export function newFileName(tableId: string, kind: FileKind): string {
  return `${TABLES_PREFIX}${tableId}/${LETTER[kind]}${ulid()}.rf`;
}

/** Whether `name` is a bulk import's file of table `tableId`, as newFileName names them. */
export function isImportFileOf(tableId: string, name: string): boolean {
  return (
    /^B[0-9A-HJKMNP-TV-Z]{26}\.rf$/.test(name.slice(`${TABLES_PREFIX}${tableId}/`.length)) &&
    name.startsWith(`${TABLES_PREFIX}${tableId}/`)
  );
}
