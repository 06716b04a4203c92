/**
 * Creating a table: its `~table:<id>` row, its name row `~tname:<name>` and one row per tablet.
 *
 * A table of up to `BATCH_TABLETS` tablets is one conditional mutation. A bigger one is written in
 * batches and still appears whole or not at all:
 *   1. the id is taken (the counter, conditional on its value) with the table's row in state `creating`,
 *      which no one lists, hosts or shows; there is no name row yet, so nothing finds it by name;
 *   2. its tablets, `BATCH_TABLETS` rows a mutation, each conditional on the table still `creating`;
 *   3. one mutation, conditional on the name being free (and the request unanswered), writes the name
 *      row and turns the table `online`: from then on it is there, with every tablet.
 * A creation that cannot finish (the name was taken meanwhile, the request answered by a repeat, the
 * store away) removes what it wrote; one whose manager died is removed by the next active manager on
 * start-up (`abandonCreations`): a creation runs in the manager that began it, so at start-up none is
 * under way.
 */
import { z } from 'zod';
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { scanRows, type MetaBackend } from '../meta/backend.js';
import {
  INSTANCE_ROW,
  TABLE_PREFIX,
  formatId,
  tableNameRow,
  tableRange,
  tableRow,
  tabletRow,
} from '../meta/keys.js';
import { tableConfigSchema, type TableConfig } from '../meta/table-config.js';
import { COL_PREV, prevValue } from '../meta/tablet.js';
import type { Cell, Condition } from '../meta/types.js';
import type { TableInfo } from '../meta/views.js';
import { checkEntityName } from '../names.js';
import { parseInput } from '../validate.js';
import type { CommitQueue } from './commit-queue.js';
import { answerCell, answerOf, unanswered } from './requests.js';
import { parseSplits } from './split-points.js';

const COUNTER_COL = 'nextTableId';
/**
 * Split points one request may carry. The RPC body limit (16 MB) bounds a request first: about 400,000
 * split points of 16 bytes, sent in hex.
 */
export const MAX_SPLITS = 1_000_000;
/** Tablet rows written by one mutation of a creation. */
export const BATCH_TABLETS = 5_000;

export const createTableSchema = z.object({
  name: z.string(),
  /** Split points as UTF-8 strings. */
  splits: z.array(z.string().min(1)).max(MAX_SPLITS).default([]),
  /** Split points as hex byte strings (for binary rows). */
  splitsHex: z
    .array(z.string().regex(/^(?:[0-9a-f]{2})+$/, 'expected a non-empty lower-case hex byte string'))
    .max(MAX_SPLITS)
    .default([]),
  config: z.unknown().optional(),
});
export type CreateTableRequest = z.input<typeof createTableSchema>;

/** Checks that named queues exist; supplied by the manager (queues live in ZooKeeper). */
export type QueueCheck = (names: string[]) => Promise<void>;

interface Creation {
  id: string;
  name: string;
  info: TableInfo;
  requestId: string | undefined;
}

export class TableCreator {
  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly checkQueues: QueueCheck,
    private readonly log: Logger,
  ) {}

  async create(request: CreateTableRequest, requestId?: string): Promise<TableInfo> {
    const answered = await answerOf<TableInfo>(this.store, requestId);
    if (answered) return answered;
    const req = parseInput(createTableSchema, request, 'body');
    checkEntityName('table', req.name, 'body.name');
    const splits = parseSplits(req.splits, req.splitsHex);
    const config = parseInput(tableConfigSchema, req.config ?? {}, 'config');
    await this.checkQueues(config.queues.map((q) => q.queue));
    const tablets = tabletCells(splits);
    const whole = tablets.length <= BATCH_TABLETS;

    for (let attempt = 0; attempt < 20; attempt++) {
      const counterText = await this.store.get(INSTANCE_ROW, COUNTER_COL);
      const counter = Number(counterText ?? '1');
      const id = formatId(counter);
      const now = Date.now();
      const info: TableInfo = { id, name: req.name, state: 'online', config, createdAt: now };
      const creation: Creation = { id, name: req.name, info, requestId };
      const conditions: Condition[] = [
        counterText === undefined
          ? { op: 'absent', row: INSTANCE_ROW, col: COUNTER_COL }
          : { op: 'equals', row: INSTANCE_ROW, col: COUNTER_COL, value: counterText },
        { op: 'absent', row: tableNameRow(req.name), col: 'id' },
      ];
      // The answer's condition comes first: a repeat must find its answer, not an existing name.
      if (requestId) conditions.unshift(unanswered(requestId));
      const puts: Cell[] = [
        { row: INSTANCE_ROW, col: COUNTER_COL, value: String(counter + 1) },
        ...tableCells(creation, config, now, whole ? 'online' : 'creating'),
        ...(whole ? [...tablets.map((t) => t(id)), ...finalCells(creation)] : []),
      ];
      const [result] = await this.commits.submit({ mutations: [{ conditions, puts }] });
      if (result?.applied) {
        const answer = whole ? info : await this.writeTablets(creation, tablets);
        this.log.info({ table: req.name, tableId: id, tablets: tablets.length }, 'table created');
        return answer;
      }
      const failed = (result?.failed.index ?? -1) - (requestId ? 1 : 0);
      if (failed === -1) return (await answerOf<TableInfo>(this.store, requestId))!;
      if (failed === 1) throw alreadyExists(req.name);
      // Another creation took the id: read the counter again.
    }
    throw new ExcError(
      'CONFLICT',
      `could not allocate a table id for ${req.name}: too many concurrent creations`,
    );
  }

  /**
   * Steps 2 and 3 of a big creation: the table's answer, or a repeat's that finished first. What was
   * written is removed if it cannot finish.
   */
  private async writeTablets(creation: Creation, tablets: ((id: string) => Cell)[]): Promise<TableInfo> {
    const creating: Condition = { op: 'equals', row: tableRow(creation.id), col: 'state', value: 'creating' };
    let finished = false;
    try {
      for (let i = 0; i < tablets.length; i += BATCH_TABLETS) {
        const puts = tablets.slice(i, i + BATCH_TABLETS).map((t) => t(creation.id));
        const [result] = await this.commits.submit({ mutations: [{ conditions: [creating], puts }] });
        if (!result?.applied)
          throw new ExcError('CONFLICT', `table ${creation.name} was removed while it was being created`);
      }
      const conditions: Condition[] = [
        ...(creation.requestId ? [unanswered(creation.requestId)] : []),
        { op: 'absent', row: tableNameRow(creation.name), col: 'id' },
        creating,
      ];
      const [result] = await this.commits.submit({ mutations: [{ conditions, puts: finalCells(creation) }] });
      finished = result?.applied === true;
    } catch (err) {
      await this.remove(creation.id).catch((cleanup: unknown) =>
        this.log.warn(
          { tableId: creation.id, err: describeError(cleanup) },
          'removing an unfinished table failed',
        ),
      );
      throw err;
    }
    if (finished) return creation.info;
    await this.remove(creation.id);
    const answer = await answerOf<TableInfo>(this.store, creation.requestId);
    if (answer) return answer;
    throw alreadyExists(creation.name);
  }

  /** Removes every table left `creating` by a manager that died (start-up: none is under way). */
  async abandonCreations(): Promise<void> {
    for await (const { row, cols } of scanRows(this.store, { prefix: TABLE_PREFIX })) {
      if (cols.get('state') !== 'creating') continue;
      const id = row.slice(TABLE_PREFIX.length);
      this.log.info(
        { tableId: id, table: cols.get('name') },
        'removing a table whose creation did not finish',
      );
      await this.remove(id);
    }
  }

  /** Removes a table that was never visible: its tablet rows (never hosted), then its row. */
  private async remove(id: string): Promise<void> {
    const range = tableRange(id);
    for (;;) {
      const rows = new Set<string>();
      for await (const { row } of scanRows(this.store, { start: range.start, end: range.end })) {
        rows.add(row);
        if (rows.size >= BATCH_TABLETS) break;
      }
      if (rows.size === 0) break;
      await this.commits.submit({ mutations: [{ deleteRows: [...rows] }] });
    }
    const creating: Condition = { op: 'equals', row: tableRow(id), col: 'state', value: 'creating' };
    await this.commits.submit({ mutations: [{ conditions: [creating], deleteRows: [tableRow(id)] }] });
  }
}

function alreadyExists(name: string): ExcError {
  return new ExcError('ALREADY_EXISTS', `table ${JSON.stringify(name)} already exists`, {
    details: { table: name },
  });
}

function tableCells(c: Creation, config: TableConfig, now: number, state: string): Cell[] {
  return [
    { row: tableRow(c.id), col: 'name', value: c.name },
    { row: tableRow(c.id), col: 'config', value: JSON.stringify(config) },
    { row: tableRow(c.id), col: 'state', value: state },
    { row: tableRow(c.id), col: 'created', value: String(now) },
  ];
}

/** What makes the table there: its name, its state online, the request's answer. */
function finalCells(c: Creation): Cell[] {
  return [
    { row: tableNameRow(c.name), col: 'id', value: c.id },
    { row: tableRow(c.id), col: 'state', value: 'online' },
    ...(c.requestId ? [answerCell(c.requestId, c.info)] : []),
  ];
}

/** Each tablet's `prev` cell, given the table id: the first tablet starts at nothing. */
function tabletCells(splits: Buffer[]): ((id: string) => Cell)[] {
  const ends = [...splits, null];
  return ends.map((end, i) => (id: string) => ({
    row: tabletRow(id, end),
    col: COL_PREV,
    value: prevValue(i === 0 ? null : splits[i - 1]!),
  }));
}
