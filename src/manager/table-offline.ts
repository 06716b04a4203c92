/**
 * Taking a table offline and bringing it back (DESIGN.md, "Offline tables"): `excompact admin table
 * offline|online`.
 *
 * Offline, in steps that are each safe to repeat (a request repeated after a lost answer, or after a
 * manager failover, finishes the job):
 *   1. the table's state becomes `offline` (one conditional change): from then on the assigner places none
 *      of its tablets, a tablet server loads none and plans no job for them, and clients get TABLE_OFFLINE;
 *   2. each hosted tablet's server is asked to let it go as offline (tserver/table-offline.ts): it cancels
 *      the tablet's running compactions (their compactors hear it with their next progress report and
 *      stop), removes its queue entries and gives up its location;
 *   3. what a server did not let go of (it did not answer) is taken from it, like a deleted table's
 *      tablets, and the queue entries left with those tablets are removed. Their reservations stay in the
 *      rows, cut off: the next host cancels every reservation older than the table's `onlineAt`.
 * The tablets' rows keep everything else: files, user compaction requests (still pending when the table is
 * back), failure records.
 *
 * Online is one conditional change (state `online`, `onlineAt` now); the assigner places the tablets on
 * its next pass, which is asked for at once.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaBackend } from '../meta/backend.js';
import { tableRow } from '../meta/keys.js';
import { COL_FUTURE, COL_LOC, queuedCol, type TabletMeta } from '../meta/tablet.js';
import type { Mutation } from '../meta/types.js';
import type { TableInfo } from '../meta/views.js';
import type { PeerClients } from '../rpc/peers.js';
import type { CommitQueue } from './commit-queue.js';
import { answerCell, answerOf } from './requests.js';
import { takeAway, type Tables } from './tables.js';

export interface OfflineParts {
  store: MetaBackend;
  commits: CommitQueue;
  tables: Tables;
  peers: PeerClients;
  notifyTservers: (what: { tableId?: string }) => void;
  kickAssignment: () => void;
  log: Logger;
}

export interface OfflineAnswer extends TableInfo {
  /** Compactions the tablet servers cancelled for it (0 when repeated). */
  cancelled: number;
}

/** Rounds of asking servers to let the tablets go (a load may land just after the state changed). */
const ROUNDS = 5;

export async function takeOffline(p: OfflineParts, name: string, requestId?: string): Promise<OfflineAnswer> {
  const answered = await answerOf<OfflineAnswer>(p.store, requestId);
  if (answered) return answered;
  const table = await p.tables.get(name);
  if (table.state === 'deleting') throw new ExcError('CONFLICT', `table ${name} is being deleted`);
  if (table.state === 'online' && !(await setState(p, table, 'offline')))
    return takeOffline(p, name, requestId);
  // The servers re-read its settings: they plan nothing for it from now on.
  p.notifyTservers({ tableId: table.id });
  let cancelled = 0;
  // A server that did not answer is not asked again: its tablets are taken from it below.
  const silent = new Set<string>();
  for (let round = 0; round < ROUNDS; round++) {
    const hosted = (await p.tables.tablets(table.id)).filter((t) => t.loc && !silent.has(t.loc.server));
    if (hosted.length === 0) break;
    const answers = await Promise.all(hosted.map((t) => letGo(p, t.loc!.server, t.row)));
    answers.forEach((a, i) => {
      if (a === undefined) silent.add(hosted[i]!.loc!.server);
      else cancelled += a;
    });
  }
  const left = await p.tables.tablets(table.id);
  const takeAways = left.flatMap((t) => takeAway(t) ?? []);
  if (takeAways.length > 0) await p.commits.submit({ mutations: takeAways });
  const cleanups = (await p.tables.tablets(table.id)).flatMap((t) => dropEntries(t));
  const info: OfflineAnswer = { ...table, state: 'offline', cancelled };
  await p.commits.submit({
    mutations: [
      ...cleanups,
      {
        conditions: [{ op: 'equals', row: tableRow(table.id), col: 'state', value: 'offline' }],
        puts: requestId ? [answerCell(requestId, info)] : [],
      },
    ],
  });
  p.log.info(
    { table: name, tableId: table.id, cancelled, takenAway: takeAways.length },
    'table taken offline',
  );
  return info;
}

export async function bringOnline(p: OfflineParts, name: string, requestId?: string): Promise<TableInfo> {
  const answered = await answerOf<TableInfo>(p.store, requestId);
  if (answered) return answered;
  const table = await p.tables.get(name);
  if (table.state === 'deleting') throw new ExcError('CONFLICT', `table ${name} is being deleted`);
  if (table.state === 'online') return table;
  const onlineAt = Date.now();
  const info: TableInfo = { ...table, state: 'online', onlineAt };
  const [applied] = await p.commits.submit({
    mutations: [
      {
        conditions: [{ op: 'equals', row: tableRow(table.id), col: 'state', value: 'offline' }],
        puts: [
          { row: tableRow(table.id), col: 'state', value: 'online' },
          { row: tableRow(table.id), col: 'onlineAt', value: String(onlineAt) },
          ...(requestId ? [answerCell(requestId, info)] : []),
        ],
      },
    ],
  });
  if (!applied?.applied) return bringOnline(p, name, requestId);
  p.notifyTservers({ tableId: table.id });
  p.kickAssignment();
  p.log.info({ table: name, tableId: table.id }, 'table brought online');
  return info;
}

async function setState(p: OfflineParts, table: TableInfo, state: 'offline'): Promise<boolean> {
  const [result] = await p.commits.submit({
    mutations: [
      {
        conditions: [{ op: 'equals', row: tableRow(table.id), col: 'state', value: table.state }],
        puts: [{ row: tableRow(table.id), col: 'state', value: state }],
      },
    ],
  });
  return result?.applied === true;
}

/** Asks `server` to let `tablet` go as offline; how many compactions it cancelled (undefined: no answer). */
async function letGo(p: OfflineParts, server: string, tablet: string): Promise<number | undefined> {
  try {
    const answer = await p.peers
      .get(server)
      .post<{ cancelled?: number }>(
        '/v1/tablets/unload',
        { tablet, offline: true },
        { idempotent: true, attempts: 2, timeoutMs: 5_000 },
      );
    return answer.cancelled ?? 0;
  } catch (err) {
    p.log.info(
      { server, tablet, err: describeError(err) },
      'a tablet server did not let an offline tablet go',
    );
    return undefined;
  }
}

/** The queue entries of an unhosted tablet, removed with its record of them. */
function dropEntries(t: TabletMeta): Mutation[] {
  if (t.queued.size === 0 || t.loc || t.future) return [];
  return [
    {
      conditions: [
        { op: 'absent', row: t.row, col: COL_LOC },
        { op: 'absent', row: t.row, col: COL_FUTURE },
      ],
      deleteRows: [...t.queued.values()],
      deletes: [...t.queued.keys()].map((qid) => ({ row: t.row, col: queuedCol(qid) })),
    },
  ];
}
