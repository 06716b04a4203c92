/**
 * `POST /v1/compactions/:id/cancel` (`excompact admin compactions cancel <id>`): one command for the three
 * things an operator cancels, told apart by the id:
 *
 * - a running compaction (its ECID): the hosting tablet server ends the reservation and requeues the job;
 * - a user compaction (the id `admin table compact` printed): its request is deleted from every tablet
 *   where it has not committed yet. The manager writes only that (and the record of it); the tablet
 *   servers, told at once, drop it from their selection and cancel a running job no other request needs
 *   (selection.ts, "Cancellation");
 * - a parked job (the ID `compactions list --state parked` shows, or its last ECID) that is a user
 *   compaction's job on one tablet: the request is deleted there with the job's failure record, so the
 *   tablet's system work goes on over those files. A parked system job cannot be cancelled: the tablet
 *   would plan the same work again at once (release it, or repair its inputs).
 *
 * Safe to repeat: a running compaction's cancel is answered again from its recorded outcome; the others
 * write their answer with their change (requests.ts).
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../meta/outcomes.js';
import { compactCol, failedCol, isParked, type TabletMeta } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import type { CancelAnswer } from '../meta/views.js';
import {
  cancelledCell,
  cancelledTablets,
  COL_REQUEST,
  parseUserCompactionRecord,
  userCompactionRow,
} from '../meta/user-compactions.js';
import type { PeerClients } from '../rpc/peers.js';
import type { RpcServer } from '../rpc/server.js';
import { parseInput } from '../validate.js';
import { workingTablets, maxAttempts, parkedUserJob, readCatalog, type ViewSources } from './admin-views.js';
import type { CommitQueue } from './commit-queue.js';
import { answerCell, answerOf, partCell, partsOf, requestIdOf, unanswered } from './requests.js';

export interface CancelParts extends ViewSources {
  commits: CommitQueue;
  peers: PeerClients;
  notifyTservers: (what: { tableId?: string; tablet?: string }) => void;
}

const params = z.object({
  id: z
    .string()
    .regex(
      /^(?:[0-9A-Z]{26}|[0-9a-f]{24})$/,
      'expected a compaction id (ECID), a user compaction id or a parked job id',
    ),
});

export function registerCancelApi(server: RpcServer, parts: () => CancelParts): void {
  server.route('POST', '/compactions/:id/cancel', {}, async ({ params: raw, query }) => {
    const p = parts();
    const { id } = parseInput(params, raw, 'path');
    const requestId = requestIdOf(query);
    const repeat = await answerOf<CancelAnswer>(p.store, requestId);
    if (repeat !== undefined) return repeat;
    const tablets = await workingTablets(p);
    const running = tablets.find((t) => t.reservations.has(id));
    if (running) return cancelRunning(p, running, id);
    const record = await p.store.row(userCompactionRow(id));
    if (record.size > 0 || tablets.some((t) => t.userCompactions.has(id)))
      return cancelUserCompaction(p, id, tablets, record, requestId);
    const parked = await findParked(p, id);
    if (parked) return cancelParked(p, parked.tablet, parked.key, requestId);
    return endedAnswer(p, id);
  });
}

/** Rounds of a user compaction's cancel, each for the tablets that split from those of the round before. */
const CANCEL_ROUNDS = 5;

/** Asks the hosting tablet server to end reservation `ecid`. */
async function cancelRunning(p: CancelParts, t: TabletMeta, ecid: string): Promise<CancelAnswer> {
  if (!t.loc) throw new ExcError('UNAVAILABLE', `tablet ${t.row} is not hosted right now; try again`);
  p.log.info({ ecid, tablet: t.row, server: t.loc.server }, 'cancel requested by an admin');
  return p.peers.get(t.loc.server).post<CancelAnswer>('/v1/cancel', { tablet: t.row, ecid }, { attempts: 2 });
}

/**
 * Deletes user compaction `id`'s request from every tablet that still holds it, recording each on its
 * record; the answer lists those tablets. One conditional mutation per tablet (its request present), so a
 * tablet that committed meanwhile keeps its result and is not counted.
 */
async function cancelUserCompaction(
  p: CancelParts,
  id: string,
  tablets: TabletMeta[],
  record: Map<string, string>,
  requestId: string | undefined,
): Promise<CancelAnswer> {
  const info = parseUserCompactionRecord(record.get(COL_REQUEST));
  const holding = tablets.filter((t) => t.userCompactions.has(id));
  const table =
    (await p.tables.getById(info?.tableId ?? holding[0]?.tableId ?? ''))?.name ?? info?.table ?? 'unknown';
  const answer = async (rows: string[]): Promise<CancelAnswer> => ({
    cancelled: rows.length > 0 || cancelledTablets(await p.store.row(userCompactionRow(id))).size > 0,
    userCompaction: { id, table, tablets: rows },
  });
  const now = Date.now();
  const cancelledRows: string[] = [];
  // A tablet that split while this ran copied the request to its daughters (a split copies only requests
  // its tablet still holds, tserver/tablet-split-rules.ts): those are cancelled in a further round.
  for (let round = 0, left = holding; left.length > 0 && round < CANCEL_ROUNDS; round++) {
    const mutations: Mutation[] = left.map((t) => ({
      conditions: [
        ...(requestId ? [unanswered(requestId)] : []),
        { op: 'present' as const, row: t.row, col: compactCol(id) },
      ],
      deletes: [{ row: t.row, col: compactCol(id) }],
      puts: [cancelledCell(id, t.row, now), ...(requestId ? [partCell(requestId, t.row, t.row)] : [])],
    }));
    const results = await p.commits.submit({ mutations });
    cancelledRows.push(...left.filter((_, i) => results[i]?.applied).map((t) => t.row));
    const done = new Set(left.map((t) => t.row));
    left = (await workingTablets(p)).filter((t) => t.userCompactions.has(id) && !done.has(t.row));
  }
  // With a request id, the tablets recorded under it (a repeat after a lost answer adds to the first).
  const rows = requestId ? await partsOf<string>(p.store, requestId) : cancelledRows;
  if (requestId) {
    const [written] = await p.commits.submit({
      mutations: [{ conditions: [unanswered(requestId)], puts: [answerCell(requestId, await answer(rows))] }],
    });
    if (!written?.applied) return (await answerOf<CancelAnswer>(p.store, requestId)) ?? answer(rows);
  }
  p.log.info({ userCompaction: id, tablets: rows.length }, 'user compaction cancelled by an admin');
  for (const row of rows) p.notifyTservers({ tablet: row });
  return answer(rows);
}

/** The parked job `id` (its failure key, or the ECID of its last attempt). */
async function findParked(
  p: CancelParts,
  id: string,
): Promise<{ tablet: TabletMeta; key: string } | undefined> {
  const catalog = await readCatalog(p);
  for (const t of catalog.tablets) {
    for (const [key, f] of t.failures) {
      if ((key === id || f.lastEcid === id) && isParked(f, maxAttempts(catalog, t.tableId)))
        return { tablet: t, key };
    }
  }
  return undefined;
}

/** Cancels the user compactions whose parked job `key` is, on tablet `t` only. */
async function cancelParked(
  p: CancelParts,
  t: TabletMeta,
  key: string,
  requestId: string | undefined,
): Promise<CancelAnswer> {
  const ids = parkedUserJob(t, key);
  if (!ids) {
    throw new ExcError(
      'CONFLICT',
      `parked job ${key} on tablet ${t.row} is a system compaction: it cannot be cancelled (the tablet ` +
        `would plan it again); release it to retry (admin compactions release ${key}) or repair its inputs`,
      { details: { id: key, tablet: t.row } },
    );
  }
  const now = Date.now();
  const answer: CancelAnswer = {
    cancelled: true,
    parked: { id: key, tablet: t.row, userCompactionIds: ids },
  };
  const [result] = await p.commits.submit({
    mutations: [
      {
        conditions: [
          ...(requestId ? [unanswered(requestId)] : []),
          { op: 'present', row: t.row, col: failedCol(key) },
          ...ids.map((id) => ({ op: 'present' as const, row: t.row, col: compactCol(id) })),
        ],
        deletes: [
          { row: t.row, col: failedCol(key) },
          ...ids.map((id) => ({ row: t.row, col: compactCol(id) })),
        ],
        puts: [
          ...ids.map((id) => cancelledCell(id, t.row, now)),
          ...(requestId ? [answerCell(requestId, answer)] : []),
        ],
      },
    ],
  });
  if (!result?.applied) {
    const repeat = await answerOf<CancelAnswer>(p.store, requestId);
    if (repeat !== undefined) return repeat;
    throw new ExcError('CONFLICT', `parked job ${key} changed while it was being cancelled; list it again`, {
      details: { id: key, tablet: t.row },
    });
  }
  p.log.info({ id: key, tablet: t.row, userCompactions: ids }, 'parked user job cancelled by an admin');
  p.notifyTservers({ tablet: t.row });
  return answer;
}

/** A compaction that has ended: how (a repeat of a cancel whose answer was lost finds it so), or none. */
async function endedAnswer(p: CancelParts, id: string): Promise<CancelAnswer> {
  const outcome = parseOutcome((await p.store.get(doneRow(id), COL_OUTCOME)) ?? '');
  if (!outcome) {
    throw new ExcError('NOT_FOUND', `no running compaction, user compaction or parked job ${id}`, {
      details: { id },
    });
  }
  const { reason, error, at } = outcome;
  // Cancelled by an admin: the answer the cancel that did it gave.
  if (outcome.outcome === 'cancelled' && reason === 'admin') return { cancelled: true };
  return {
    cancelled: false,
    ended: { outcome: outcome.outcome, at, ...(reason ? { reason } : {}), ...(error ? { error } : {}) },
  };
}
