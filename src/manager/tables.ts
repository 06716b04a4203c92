/**
 * The tables API of the manager: create (with split points), list, show, configure, delete.
 *
 * A table is `~table:<id>` (name, config, state) plus `~tname:<name>` (the name's id, which is what makes
 * names unique: creation is conditional on it being absent) plus one row per tablet. Creation is one
 * conditional mutation (a big one a few, table-create.ts), so a table appears whole or not at all.
 *
 * Deletion first marks the table `deleting` and takes its tablets away from their tablet servers (clears
 * `loc`/`future`, after which no tablet server can change them), then removes each tablet row with its
 * queue entries while recording `~del` rows for its files and for the outputs of its reservations, and
 * finally the table rows. Every step is idempotent; a manager that dies half way resumes on
 * start-up.
 *
 * Create, configure and delete take the caller's request id (requests.ts): the answer is written by the
 * mutation that completes the change, so a request repeated after its answer was lost is answered the
 * same and applied once.
 */
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { TABLE_PREFIX, delRow, tableNameRow, tableRange, tableRow } from '../meta/keys.js';
import { scanRows, type MetaBackend, type MetaReader } from '../meta/backend.js';
import { tableConfigSchema, type TableConfig, type TableConfigInput } from '../meta/table-config.js';
import { ingestRow } from '../meta/ingest-ids.js';
import { outcomeCell } from '../meta/outcomes.js';
import { COL_FUTURE, COL_LOC, locationValue, parseTablet, type TabletMeta } from '../meta/tablet.js';
import type { Cell, Mutation } from '../meta/types.js';
import { tableOfflineError, type TableInfo, type TableState } from '../meta/views.js';
import { checkEntityName } from '../names.js';
import { parseInput } from '../validate.js';
import type { CommitQueue } from './commit-queue.js';
import { answerCell, answerOf, unanswered } from './requests.js';
import { TableCreator, type CreateTableRequest, type QueueCheck } from './table-create.js';

/** Rounds of taking a deleted table's tablets away from their servers (see finishDelete). */
const TAKE_AWAY_ROUNDS = 5;

export class Tables {
  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly checkQueues: QueueCheck,
    private readonly log: Logger,
  ) {
    this.creator = new TableCreator(store, commits, checkQueues, log);
  }

  private readonly creator: TableCreator;

  /** Creates a table, whole or not at all (table-create.ts). */
  create(request: CreateTableRequest, requestId?: string): Promise<TableInfo> {
    return this.creator.create(request, requestId);
  }

  /** Removes the tables a manager that died left half created (start-up). */
  abandonCreations(): Promise<void> {
    return this.creator.abandonCreations();
  }

  async list(): Promise<TableInfo[]> {
    const out: TableInfo[] = [];
    for await (const { row, cols } of scanRows(this.store, { prefix: TABLE_PREFIX })) {
      // A table being created is not there yet (table-create.ts).
      if (cols.get('state') !== 'creating') out.push(toTableInfo(row.slice(TABLE_PREFIX.length), cols));
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** A table by name; UNKNOWN_TABLE (404) naming it otherwise. */
  async get(name: string): Promise<TableInfo> {
    const id = await this.idOf(name);
    return toTableInfo(id, await this.store.row(tableRow(id)));
  }

  private async idOf(name: string): Promise<string> {
    checkEntityName('table', name);
    const id = await this.store.get(tableNameRow(name), 'id');
    if (!id)
      throw new ExcError('UNKNOWN_TABLE', `no table named ${JSON.stringify(name)}`, {
        details: { table: name },
      });
    return id;
  }

  async getById(id: string): Promise<TableInfo | undefined> {
    const cols = await this.store.row(tableRow(id));
    return cols.size === 0 ? undefined : toTableInfo(id, cols);
  }

  /** The tablets of a table, in row order. */
  tablets(tableId: string): Promise<TabletMeta[]> {
    const { start, end } = tableRange(tableId);
    return readTablets(this.store, start, end);
  }

  /**
   * At most `limit` tablets of a table after the tablet row `after` (from the first without it), and the
   * row to ask after for the next page when there may be more.
   */
  async tabletsPage(
    tableId: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ tablets: TabletMeta[]; next?: string }> {
    const range = tableRange(tableId);
    const start = after !== undefined && after > range.start ? after : range.start;
    const tablets: TabletMeta[] = [];
    for await (const { row, cols } of scanRows(this.store, { start, end: range.end })) {
      if (after !== undefined && row <= after) continue;
      if (tablets.length === limit) return { tablets, next: tablets.at(-1)?.row ?? after ?? '' };
      tablets.push(parseTablet(row, cols));
    }
    return { tablets };
  }

  /** `changes`, or what a function makes of the config as committed (run again if it changed meanwhile). */
  async configure(
    name: string,
    changes: TableConfigInput | ((current: TableConfig) => TableConfigInput),
    requestId?: string,
  ): Promise<TableInfo> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const answered = await answerOf<TableInfo>(this.store, requestId);
      if (answered) return answered;
      // The condition must name the config the merge started from, read with it: a change committed
      // while the queues are checked makes this attempt fail and merge again, instead of being overwritten.
      const id = await this.idOf(name);
      const cols = await this.store.row(tableRow(id));
      const table = toTableInfo(id, cols);
      const oldText = cols.get('config');
      if (table.state === 'deleting') throw new ExcError('CONFLICT', `table ${name} is being deleted`);
      const change = typeof changes === 'function' ? changes(table.config) : changes;
      const merged = parseConfig({ ...table.config, ...(change as object) });
      await this.checkQueues(merged.queues.map((q) => q.queue));
      const info: TableInfo = { ...table, config: merged };
      const [result] = await this.commits.submit({
        mutations: [
          {
            conditions: [
              ...(requestId ? [unanswered(requestId)] : []),
              oldText === undefined
                ? { op: 'absent', row: tableRow(id), col: 'config' }
                : { op: 'equals', row: tableRow(id), col: 'config', value: oldText },
              { op: 'equals', row: tableRow(id), col: 'state', value: 'online' },
            ],
            puts: [
              { row: tableRow(id), col: 'config', value: JSON.stringify(merged) },
              ...(requestId ? [answerCell(requestId, info)] : []),
            ],
          },
        ],
      });
      if (result?.applied) {
        this.log.info({ table: name, tableId: id, config: merged }, 'table configured');
        return info;
      }
    }
    throw new ExcError('CONFLICT', `could not configure ${name}: too many concurrent changes`);
  }

  /** The table, which must be online (TABLE_OFFLINE otherwise): for what needs its tablets hosted. */
  async getOnline(name: string): Promise<TableInfo> {
    const table = await this.get(name);
    if (table.state === 'offline') throw tableOfflineError(table.name);
    return table;
  }

  /** Tables whose queue routes name `queue`. */
  async routingTo(queue: string): Promise<TableInfo[]> {
    return (await this.list()).filter((t) => t.config.queues.some((r) => r.queue === queue));
  }

  /**
   * Deletes a table (see the module comment). `unload` asks a tablet server to drop a tablet; it is best
   * effort, since clearing `loc` already stops the server from changing the tablet.
   */
  async delete(
    name: string,
    unload: (server: string, tablet: string) => Promise<void>,
    requestId?: string,
  ): Promise<TableInfo> {
    const answered = await answerOf<TableInfo>(this.store, requestId);
    if (answered) return answered;
    const table = await this.get(name);
    if (table.state !== 'deleting') {
      const [marked] = await this.commits.submit({
        mutations: [
          {
            conditions: [{ op: 'equals', row: tableRow(table.id), col: 'state', value: table.state }],
            puts: [{ row: tableRow(table.id), col: 'state', value: 'deleting' }],
          },
        ],
      });
      if (!marked?.applied) return this.delete(name, unload, requestId);
    }
    const info: TableInfo = { ...table, state: 'deleting' };
    await this.finishDelete(table.id, unload, requestId ? [answerCell(requestId, info)] : []);
    this.log.info({ table: name, tableId: table.id }, 'table deleted');
    return info;
  }

  /** Completes deletions interrupted by a manager failure. */
  async resumeDeletes(unload: (server: string, tablet: string) => Promise<void>): Promise<void> {
    for (const table of await this.list()) {
      if (table.state === 'deleting') {
        this.log.info({ table: table.name, tableId: table.id }, 'resuming deletion');
        await this.finishDelete(table.id, unload);
      }
    }
  }

  /** `answer`: cells written by the last step (a request's answer). */
  private async finishDelete(
    tableId: string,
    unload: (server: string, tablet: string) => Promise<void>,
    answer: Cell[] = [],
  ): Promise<void> {
    // 1. Take every tablet away from its server (one submission for all of them). Again while some are
    //    hosted: a tablet server may have split one just before it was taken (the daughters are hosted).
    for (let round = 0; round < TAKE_AWAY_ROUNDS; round++) {
      const hosted: TabletMeta[] = [];
      const takeAways: Mutation[] = [];
      for (const tablet of await this.tablets(tableId)) {
        const mutation = takeAway(tablet);
        if (!mutation) continue;
        hosted.push(tablet);
        takeAways.push(mutation);
      }
      if (takeAways.length === 0) break;
      await this.commits.submit({ mutations: takeAways });
      for (const tablet of hosted) {
        for (const loc of [tablet.loc, tablet.future]) {
          if (loc) await unload(loc.server, tablet.row).catch(() => undefined);
        }
      }
    }
    // 2. Remove the tablets with their queue entries (each tablet records its own, see queue/entries.ts),
    //    recording their files and reservation outputs for the garbage collector. No tablet server can
    //    change them any more, so what we read is what we delete.
    const now = String(Date.now());
    const removals: Mutation[] = [];
    for (const tablet of await this.tablets(tableId)) {
      if (tablet.loc || tablet.future) {
        throw new ExcError('CONFLICT', `tablet ${tablet.row} was assigned during deletion; retry the delete`);
      }
      const doomed = [
        ...tablet.files.keys(),
        ...[...tablet.reservations.values()].map((r) => r.output),
        ...[...tablet.splits.values()].flatMap((s) => s.done.flatMap((d) => (d?.output ? [d.output] : []))),
      ];
      // Each reservation ends here, with the table: its outcome says so (its compactor, finding it gone
      // from the tablet's row, has stopped or soon will).
      const ended = [...tablet.reservations].map(([ecid, r]) =>
        outcomeCell(ecid, {
          outcome: 'cancelled',
          reason: 'table-deleted',
          tablet: tablet.row,
          queueId: r.queueId,
          compactor: r.compactor,
          kind: r.kind,
          inputs: r.inputs.length,
          ...(r.userCompactionIds ? { userCompactionIds: r.userCompactionIds } : {}),
          reservedAt: r.reservedAt,
          at: Number(now),
          server: 'manager',
        }),
      );
      removals.push({
        conditions: [{ op: 'absent', row: tablet.row, col: COL_LOC }],
        deleteRows: [tablet.row, ingestRow(tablet.row), ...tablet.queued.values()],
        puts: [...doomed.map((file) => ({ row: delRow(file), col: 'at', value: now })), ...ended],
      });
    }
    if (removals.length > 0) await this.commits.submit({ mutations: removals });
    // 3. The table itself.
    const name = await this.store.get(tableRow(tableId), 'name');
    await this.commits.submit({
      mutations: [{ deleteRows: [tableRow(tableId), ...(name ? [tableNameRow(name)] : [])], puts: answer }],
    });
  }
}

/**
 * Takes a tablet from its servers: clears its `loc` and `future`, each conditional on the value read, after
 * which no tablet server can change it. Undefined when it has neither.
 */
export function takeAway(t: TabletMeta): Mutation | undefined {
  const mutation: Mutation = { conditions: [], deletes: [] };
  for (const [col, loc] of [
    [COL_LOC, t.loc],
    [COL_FUTURE, t.future],
  ] as const) {
    if (!loc) continue;
    mutation.conditions!.push({ op: 'equals', row: t.row, col, value: locationValue(loc) });
    mutation.deletes!.push({ row: t.row, col });
  }
  return mutation.deletes!.length > 0 ? mutation : undefined;
}

/** All tablets with rows in [start, end). */
export async function readTablets(store: MetaReader, start: string, end: string): Promise<TabletMeta[]> {
  const out: TabletMeta[] = [];
  for await (const { row, cols } of scanRows(store, { start, end })) out.push(parseTablet(row, cols));
  return out;
}

function toTableInfo(id: string, cols: Map<string, string>): TableInfo {
  return {
    id,
    name: cols.get('name') ?? '',
    state: (cols.get('state') as TableState | undefined) ?? 'online',
    config: tableConfigSchema.parse(JSON.parse(cols.get('config') ?? '{}')),
    createdAt: Number(cols.get('created') ?? '0'),
    ...(cols.has('onlineAt') ? { onlineAt: Number(cols.get('onlineAt')) } : {}),
  };
}

function parseConfig(value: unknown): TableConfig {
  return parseInput(tableConfigSchema, value, 'config');
}
