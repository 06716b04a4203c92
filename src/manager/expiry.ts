/**
 * Which record rows the garbage collector trims: outcome rows and user compaction records (`~done:`,
 * `~ucomp:`) past their retention or beyond a row limit. Their ids are ULIDs, which start with their
 * time, so the old ones come first in a scan.
 */
import { ulidTime } from '../ids.js';
import { scanRows, type MetaReader } from '../meta/backend.js';

/**
 * The rows under `prefix` older than `retentionMs`, and the oldest beyond `maxRows`. Without a row limit
 * the scan stops at the first row kept; with one, every row is read (to count them), so the collector
 * passes a limit only on its sweeps.
 */
export async function expiredRecords(
  store: MetaReader,
  prefix: string,
  options: { retentionMs?: number; maxRows?: number; now: number },
): Promise<string[]> {
  const { retentionMs, maxRows, now } = options;
  if (retentionMs === undefined && maxRows === undefined) return [];
  const cutoff = retentionMs === undefined ? -Infinity : now - retentionMs;
  const all: string[] = [];
  let old = 0;
  for await (const row of scanRows(store, { prefix })) {
    if (ulidTime(row.row.slice(prefix.length)) < cutoff) old++;
    else if (maxRows === undefined) break;
    all.push(row.row);
  }
  return all.slice(0, Math.max(old, maxRows === undefined ? 0 : all.length - maxRows));
}
