/**
 * A tablet's applied ingest request ids (DESIGN.md, "Metadata store"): the row `~ingest:<tablet row>`
 * holds, per column `<id>`, when an ingest request with that id was applied (a retried request is not
 * applied twice), for {@link INGEST_DEDUPE_MS}. Not in the tablet's row: a busy tablet remembers thousands
 * of them, and everything that reads tablets (the manager's assignment pass, the collector, admin views)
 * would parse them every time. The tablet server reads both rows when it loads a tablet and sees the ids
 * as `ingest:<id>` columns of the tablet (TabletMeta.ingests).
 */
import { INGEST_PREFIX } from './tablet.js';

/**
 * How long a tablet remembers an ingest request id. Clients retry a request only within this window
 * (their deadline is far shorter), so a retry is always recognised.
 */
export const INGEST_DEDUPE_MS = 15 * 60_000;

/**
 * The ids of `ingests` (oldest first, as TabletMeta.ingests keeps them) remembered for longer than
 * INGEST_DEDUPE_MS at `now`: only the expired ones are visited, however many a busy tablet remembers. An
 * id out of order (a clock stepping back) is only forgotten later than it could be, never sooner.
 */
export function expiredIngests(ingests: ReadonlyMap<string, number>, now: number): string[] {
  const out: string[] = [];
  for (const [id, at] of ingests) {
    if (now - at <= INGEST_DEDUPE_MS) break;
    out.push(id);
  }
  return out;
}

/** The row of a tablet's applied ingest request ids (columns: the ids; values: when). */
export const INGEST_ROW_PREFIX = '~ingest:';
export const ingestRow = (tabletRow: string): string => `${INGEST_ROW_PREFIX}${tabletRow}`;

/** A tablet's row with its ingest ids as the tablet server sees it: `ingest:<id>` columns added. */
export function withIngests(cols: Map<string, string>, ingests: Map<string, string>): Map<string, string> {
  const out = new Map(cols);
  for (const [id, at] of ingests) out.set(`${INGEST_PREFIX}${id}`, at);
  return out;
}
