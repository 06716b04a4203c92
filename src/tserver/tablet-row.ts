/**
 * Reading a tablet back from the store, as its tablet server sees it: the tablet's row with its ingest
 * ids (kept in a row of their own, `~ingest:<tablet>`; see meta/tablet.ts) as `ingest:<id>` columns; and
 * whether a failed change needs reading back at all.
 */
import { ExcError } from '../errors.js';
import type { MetaClient } from '../meta/client.js';
import { notApplied } from '../rpc/client.js';
import { ingestRow, withIngests } from '../meta/ingest-ids.js';
import { backoffDelay, sleep } from '../retry.js';

/** Both rows, read together, retried for `forMs` while the manager does not answer. */
export async function readTabletRow(
  meta: MetaClient,
  row: string,
  forMs: number,
): Promise<Map<string, string>> {
  const deadline = Date.now() + forMs;
  for (let attempt = 0; ; attempt++) {
    try {
      const [cols, ingests] = await Promise.all([meta.row(row), meta.row(ingestRow(row))]);
      return withIngests(cols, ingests);
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
