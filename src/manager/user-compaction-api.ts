/**
 * `GET /v1/user-compactions/:id`: where a user compaction (`admin table compact`) stands on each of its
 * tablets — pending, selected, running (with progress), done (with the job that committed it) — from the
 * tablets' rows, its record (`~ucomp:<id>`) and the outcome rows of the jobs that name it. Works for as
 * long as those are kept (`EXC_OUTCOME_RETENTION_MS`), so a compaction can be followed (`--wait`) by its
 * id long after it was requested, by another admin, after any restart.
 *
 * A job split into sub-jobs runs and is done as a whole: its split's id and every sub-job's ecid, what
 * they read (running), its output, and its run time from the first sub-job's reservation to the last commit — wall-clock, not the
 * sum of the sub-jobs' times (they overlap; a redone sub-job's wait counts). An admin's cancel of an
 * attempt is not counted as a failed attempt (user-compaction-status.ts).
 */
import { encodeTime } from 'ulid';
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { ulidTime } from '../ids.js';
import { DONE_PREFIX, parseOutcome } from '../meta/outcomes.js';
import { scanAll, type MetaReader } from '../meta/backend.js';
import { parseTablet, type TabletMeta } from '../meta/tablet.js';
import type { TableInfo } from '../meta/views.js';
import {
  cancelledTablets,
  COL_REQUEST,
  ENDED_STATES,
  parseUserCompactionRecord,
  userCompactionRow,
  type TabletCompactionStatus,
  type UserCompactionStatus,
} from '../meta/user-compactions.js';
import type { RpcServer } from '../rpc/server.js';
import { parseInput } from '../validate.js';
import { workingTablets } from './admin-views.js';
import type { ViewSources } from './admin-views.js';
import {
  attemptFields,
  committedFields,
  runningFields,
  tallyOutcome,
  type TabletOutcomes,
} from './user-compaction-status.js';

const params = z.object({ id: z.string().regex(/^[0-9A-Z]{26}$/, 'expected a user compaction id') });

export function registerUserCompactionApi(server: RpcServer, parts: () => ViewSources): void {
  server.route('GET', '/user-compactions/:id', {}, async ({ params: raw }) => {
    const p = parts();
    const { id } = parseInput(params, raw, 'path');
    return userCompactionStatus(p, id);
  });
}

export async function userCompactionStatus(p: ViewSources, id: string): Promise<UserCompactionStatus> {
  const { store } = p;
  const cells = await store.row(userCompactionRow(id));
  const record = parseUserCompactionRecord(cells.get(COL_REQUEST));
  const cancelled = cancelledTablets(cells);
  let rows: string[];
  let table: string;
  let info: TableInfo | undefined;
  if (record) {
    // The tablets it was asked of, and those that split from them since and still hold it.
    const daughters = (await p.tables.tablets(record.tableId))
      .filter((t) => t.userCompactions.has(id) && !record.tablets.includes(t.row))
      .map((t) => t.row);
    rows = [...record.tablets, ...daughters];
    info = await p.tables.getById(record.tableId);
    table = info?.name ?? record.table;
  } else {
    // Requested before records were kept: the tablets still holding the request are all there is.
    const holding = (await workingTablets(p)).filter((t) => t.userCompactions.has(id));
    if (holding.length === 0)
      throw new ExcError('NOT_FOUND', `no user compaction ${id} (or it ended too long ago)`, {
        details: { id },
      });
    rows = holding.map((t) => t.row);
    info = await p.tables.getById(holding[0]!.tableId);
    table = info?.name ?? holding[0]!.tableId;
  }
  const outcomes = await outcomesOf(store, id);
  // A parked job is not running (a deleted table's tablets are gone: any value does).
  const maxAttempts = info?.config.maxAttempts ?? Infinity;
  const tablets = await Promise.all(
    rows.map((row) => tabletStatus(store, row, id, outcomes.get(row), cancelled.has(row), maxAttempts)),
  );
  return {
    id,
    table,
    filters: record?.filters ?? [],
    ...(record?.queue ? { queue: record.queue } : {}),
    ...(record?.select ? { select: record.select } : {}),
    requestedAt: record?.requestedAt ?? 0,
    tablets,
    done: tablets.every((t) => ENDED_STATES.has(t.state)),
    cancelled: tablets.filter((t) => t.state === 'cancelled').length,
  };
}

/**
 * How far before a request's id its jobs' ecids may be dated. The id is made on the admin's host, the
 * ecids on the tablet servers': with the admin's clock ahead, a scan from the id's own time left out the
 * jobs, and their tablets showed done without ecid or output, or running with no failed attempt.
 */
export const OUTCOME_CLOCK_SKEW_MS = 15 * 60_000;

/** Where the scan for the outcomes of request `id`'s jobs starts (ecids are ULIDs, dated). */
export function outcomeScanStart(id: string): string {
  const at = ulidTime(id);
  if (Number.isNaN(at)) return DONE_PREFIX;
  return `${DONE_PREFIX}${encodeTime(Math.max(0, at - OUTCOME_CLOCK_SKEW_MS), 10)}`;
}

/** The outcomes of the jobs that name `id`, by tablet. */
async function outcomesOf(store: MetaReader, id: string): Promise<Map<string, TabletOutcomes>> {
  const byTablet = new Map<string, TabletOutcomes>();
  const start = outcomeScanStart(id);
  for await (const cell of scanAll(store, { prefix: DONE_PREFIX, start })) {
    const o = parseOutcome(cell.value);
    if (o) tallyOutcome(byTablet, id, cell.row.slice(DONE_PREFIX.length), o);
  }
  return byTablet;
}

async function tabletStatus(
  store: MetaReader,
  row: string,
  id: string,
  outcomes: TabletOutcomes | undefined,
  cancelled: boolean,
  maxAttempts: number,
): Promise<TabletCompactionStatus> {
  const base = { tablet: row, ...attemptFields(outcomes) };
  const cols = await store.row(row);
  const t: TabletMeta | undefined = cols.size === 0 ? undefined : parseTablet(row, cols);
  if (t?.userCompactions.has(id)) {
    const selected = t.selection?.ids.includes(id) ? { files: t.selection.files } : {};
    const running = runningFields(t, id, maxAttempts);
    if (running) return { ...base, ...selected, ...running };
    return { ...base, ...selected, state: selected.files ? 'selected' : 'pending' };
  }
  const c = outcomes?.committed;
  if (c) return { ...base, ...committedFields(c, id) };
  // A job that committed after its request was cancelled (they raced) is done, not cancelled.
  if (cancelled) return { ...base, state: 'cancelled' };
  return { ...base, state: t ? 'done' : 'gone' };
}
