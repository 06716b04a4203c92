/**
 * Reading a tablet back from the store, as its tablet server sees it: the tablet's row with its ingest
 * ids (kept in a row of their own, `~ingest:<tablet>`; see meta/tablet.ts) as `ingest:<id>` columns; and
 * whether a failed change needs reading back at all.
 */
import { ExcError } from '../errors.js';
import type { MetaClient } from '../meta/client.js';
import { notApplied } from '../rpc/client.js';
import { ingestRow, withIngests } from '../meta/ingest-ids.js';
import { COL_VERSION } from '../meta/tablet.js';
import { backoffDelay, sleep } from '../retry.js';

/**
 * Both rows as of one moment, retried for `forMs` while the manager does not answer.
 *
 * They are two reads, and a change may commit between them (a change whose answer was lost, applied
 * late): read in parallel, the ingest ids could show a batch whose file the tablet's row did not, and
 * the server then answered the batch's retry "duplicate" while its scans left the file out. So the
 * tablet's row is read, then the ingest ids, then the tablet's row again: every change to the ingest ids
 * also bumps the tablet's `ver`, so when both reads of the row show the same `ver`, nothing changed in
 * between and the ids go with it; otherwise all three are read again.
 */
export async function readTabletRow(
  meta: MetaClient,
  row: string,
  forMs: number,
): Promise<Map<string, string>> {
  const deadline = Date.now() + forMs;
  for (let attempt = 0; ; attempt++) {
    try {
      let cols = await meta.row(row);
      for (;;) {
        const ingests = await meta.row(ingestRow(row));
        const again = await meta.row(row);
        if (again.get(COL_VERSION) === cols.get(COL_VERSION)) return withIngests(again, ingests);
        if (Date.now() > deadline)
          throw new ExcError('OUTCOME_UNKNOWN', `tablet ${row} kept changing while it was read back`);
        cols = again;
      }
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(backoffDelay(attempt, { baseMs: 100, maxMs: 2_000 }));
    }
  }
}

/** Answers with which the manager refuses a whole mutation before applying any of it. */
const REFUSED: ReadonlySet<string> = new Set([
  'FENCED',
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'PAYLOAD_TOO_LARGE',
]);

/** Whether a mutation certainly was not applied (so the tablet need not be read back). */
export function certainlyNotApplied(err: unknown): boolean {
  return notApplied(err) || (err instanceof ExcError && REFUSED.has(err.code));
}
