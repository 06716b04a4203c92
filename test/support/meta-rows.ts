/**
 * The metadata store as tests read it: a tablet's row parsed, every tablet, the entries of a compaction
 * queue, and the files marked for deletion.
 *
 *   const t = await readTablet(meta, tablet);      // t.files, t.reservations, t.failures, ...
 *   expect(await queueRows(meta, queue.id)).toEqual([]);
 */
import type { MetaClient } from '../../src/meta/client.js';
import type { Mutation } from '../../src/meta/types.js';
import { DEL_PREFIX, queuePrefix } from '../../src/meta/keys.js';
import { parseTablet, type TabletMeta } from '../../src/meta/tablet.js';

export async function readTablet(meta: MetaClient, row: string): Promise<TabletMeta> {
  return parseTablet(row, await meta.row(row));
}

/** Every tablet of every table (tablet rows sort between '0000' and the '~' system rows). */
export async function allTablets(meta: MetaClient): Promise<TabletMeta[]> {
  const rows = new Map<string, Map<string, string>>();
  for await (const c of meta.scanAll({ start: '0000', end: '~' })) {
    const cols = rows.get(c.row) ?? new Map<string, string>();
    cols.set(c.col, c.value);
    rows.set(c.row, cols);
  }
  return [...rows].map(([row, cols]) => parseTablet(row, cols));
}

/** The `~cq` rows of one queue, in store order. */
export async function queueRows(meta: MetaClient, queueId: string): Promise<string[]> {
  const rows: string[] = [];
  for await (const c of meta.scanAll({ prefix: queuePrefix(queueId) })) rows.push(c.row);
  return rows;
}

/** The files marked for deletion (`~del` rows), sorted. */
export async function delRows(meta: MetaClient): Promise<string[]> {
  const rows: string[] = [];
  for await (const c of meta.scanAll({ prefix: DEL_PREFIX })) rows.push(c.row.slice(DEL_PREFIX.length));
  return rows.sort();
}

/** A model of the store's cells, row → column → value, for checking what follows mutations. */
export type Cells = Map<string, Map<string, string>>;

/** Applies `m` to `cells` as the store does: its deletes, then its whole-row deletes, then its puts. */
export function applyToCells(cells: Cells, m: Mutation): void {
  for (const d of m.deletes ?? []) cells.get(d.row)?.delete(d.col);
  for (const r of m.deleteRows ?? []) cells.delete(r);
  for (const p of m.puts ?? []) {
    let cols = cells.get(p.row);
    if (!cols) cells.set(p.row, (cols = new Map<string, string>()));
    cols.set(p.col, p.value);
  }
}
