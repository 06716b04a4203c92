/**
 * What the compactor reads of its job's tablet from the metadata store, when the tablet's host does not
 * answer for it (NOT_SERVING, unreachable) or an answer was lost: where the tablet is now, whether the
 * reservation is still there, and whether a commit whose answer was lost went through.
 *
 * A reservation lives in the row of the tablet it was reserved on (`ecomp:<ecid>`), and stays there
 * through a split (in the daughter that keeps the row) and a move; it leaves only with its commit or its
 * cancel. So a row without it — or no row at all, the table deleted or the tablet merged away — means
 * the job can never commit, and the compactor stops at once instead of merging to the end and retrying
 * its commit.
 */
import type { MetaClient } from '../meta/client.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../meta/outcomes.js';
import { ecompCol, fileCol, parseTablet } from '../meta/tablet.js';
import type { ReservedJob } from '../queue/protocol.js';

export interface TabletWhereabouts {
  /** The tablet's host now, if it has one. */
  host: string | undefined;
  /** Whether the reservation is still in the tablet's row (false: it can never commit). */
  reserved: boolean;
}

export async function lookUpTablet(
  meta: MetaClient,
  tablet: string,
  ecid: string,
): Promise<TabletWhereabouts> {
  const cols = await meta.row(tablet);
  if (!cols.has(ecompCol(ecid))) return { host: undefined, reserved: false };
  return { host: parseTablet(tablet, cols).loc?.server, reserved: true };
}

/**
 * Whether the metadata store shows the job committed: the outcome its commit recorded, or (once outcomes
 * are trimmed) its inputs replaced by its output. A sub-job of a split leaves the inputs in place until the
 * last one commits: only its outcome tells.
 */
export async function committedInStore(
  meta: MetaClient,
  tablet: string,
  job: ReservedJob,
  output: { size: number } | null,
): Promise<boolean> {
  const recorded = (await meta.row(doneRow(job.ecid))).get(COL_OUTCOME);
  const outcome = recorded === undefined ? undefined : parseOutcome(recorded);
  if (outcome) return outcome.outcome === 'committed';
  if (job.range) return false;
  const cols = await meta.row(tablet);
  if (cols.has(ecompCol(job.ecid))) return false;
  if (job.inputs.some((i) => cols.has(fileCol(i.name)))) return false;
  return output === null || cols.has(fileCol(job.output));
}
