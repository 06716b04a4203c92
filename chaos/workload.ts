/**
 * The chaos run's workload: continuous ingest into every table — new rows, overwrites of existing cells,
 * deletes, puts with explicit older timestamps, rows and families meant to be filtered out, and on the
 * table with a ttl, puts long expired — with an exact model of each table; scans behind a write fence;
 * user compactions with filters or selectors now and then.
 *
 * Every write is an `ingest` with a request id, retried with the same id until it is acknowledged (the
 * cluster applies a request id once), so each acknowledged write is applied exactly once and the model
 * is exact. A fence on a table holds new writes to it and waits for those in flight; a scan taken behind
 * it must equal the model.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import type { ScannedEntry } from '../src/client/client.js';
import { describeError } from '../src/errors.js';
import { sleep } from '../src/retry.js';
import { importEntries, runImport } from './bulk-imports.js';
import type { ChaosCluster } from './cluster.js';
import { cellKey, type Comparison } from './model.js';
import type { ChaosLog } from './report.js';
import type { Rng } from './rng.js';
import { TableState, type Op, type TableSpec } from './tables.js';
import { followCompaction, requestCompaction, selectedCompaction } from './user-compactions.js';

const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');
const ROWS_PER_LETTER = 300;
const DAY = 86_400_000;
/** How long a write is retried (under its request id) before the run calls it stuck. */
const WRITE_DEADLINE_MS = 10 * 60_000;

export interface WorkloadFigures {
  writes: number;
  entries: number;
  scans: number;
  userCompactions: number;
  stuckWrites: number;
}

export class Workload {
  readonly tables: TableState[];
  readonly figures: WorkloadFigures = { writes: 0, entries: 0, scans: 0, userCompactions: 0, stuckWrites: 0 };
  /** Problems found by scans, by kind, as distinct table/key strings. */
  readonly problems = { lost: new Set<string>(), resurrected: new Set<string>(), wrong: new Set<string>() };
  private clock = Math.floor(Date.now() / 4) * 4;
  private running = false;
  private writers: Promise<void>[] = [];
  private opCount = 0;
  /** Every acknowledged write, for the analysis of a failed run. */
  private readonly journal: WriteStream;

  constructor(
    private readonly cluster: ChaosCluster,
    specs: TableSpec[],
    private readonly rng: Rng,
    private readonly seed: string,
    private readonly log: ChaosLog,
    journalFile: string,
  ) {
    this.tables = specs.map((s) => new TableState(s, seed));
    this.journal = createWriteStream(journalFile);
  }

  closeJournal(): Promise<void> {
    return new Promise((resolve) => this.journal.end(resolve));
  }

  async createTables(): Promise<void> {
    for (const t of this.tables) {
      const config = t.spec.config.flatMap((c) => ['--config', c]);
      await this.cluster.cli([
        'admin',
        'table',
        'create',
        t.spec.name,
        '--splits',
        t.spec.splits.join(','),
        ...config,
      ]);
    }
  }

  /** Starts `writers` loops writing about `opsPerSecond` in all. */
  start(writers: number, opsPerSecond: number): void {
    this.running = true;
    const period = (1000 * writers) / opsPerSecond;
    for (let w = 0; w < writers; w++) {
      const rng = this.rng.fork(`writer-${w}`);
      this.writers.push(
        (async () => {
          while (this.running) {
            const began = Date.now();
            await this.writeOnce(rng);
            await sleep(Math.max(0, period - (Date.now() - began)));
          }
        })(),
      );
    }
  }

  /** Stops writing and waits for the writes in flight. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.writers);
    this.writers = [];
  }

  private tick(): number {
    this.clock += 4;
    return this.clock;
  }

  private async writeOnce(rng: Rng): Promise<void> {
    const table = rng.weighted(Object.fromEntries(this.tables.map((t, i) => [String(i), t.spec.weight])));
    const t = this.tables[Number(table)]!;
    await t.track(
      () => this.running,
      () => this.makeOp(t, rng),
      (op) => this.ingest(t, op, `chaos-${this.seed}-${++this.opCount}`),
    );
  }

  /**
   * A bulk import into `table` (bulk-imports.ts), counted in flight like a write until the import command
   * succeeded and the model learnt its entries.
   */
  async bulkImport(table: string, pick: number, dir: string): Promise<number> {
    const t = this.tables.find((x) => x.spec.name === table)!;
    let count = 0;
    await t.track(
      () => this.running,
      () => ({ entries: importEntries(pick, () => this.tick()), rowGen: t.rowGen, familyGen: t.familyGen }),
      async (op) => {
        try {
          await runImport(this.cluster, this.log, dir, table, t.model, pick, op.entries);
        } catch (err) {
          // It may still be applied, in part: the model can no longer be exact for this table.
          this.figures.stuckWrites++;
          throw err;
        }
        t.model.apply(op.entries);
        count = op.entries.length;
        this.figures.entries += count;
      },
    );
    return count;
  }

  /** Writes one op under its request id until the cluster acknowledges it, then records it. */
  private async ingest(t: TableState, op: Op, requestId: string): Promise<void> {
    const started = Date.now();
    const rows = op.entries.map((e) => ({
      ...e,
      ...(e.delete ? {} : { value: t.model.valueOf(e.row, e.cf, e.cq, e.ts) }),
    }));
    for (let attempt = 0; ; attempt++) {
      try {
        await this.cluster.client.ingest(t.spec.name, rows, { requestId });
        break;
      } catch (err) {
        if (Date.now() - started > WRITE_DEADLINE_MS) {
          this.figures.stuckWrites++;
          this.log.event(
            'write-stuck',
            { table: t.spec.name, requestId, err: describeError(err) },
            `STUCK write ${requestId}: ${describeError(err)}`,
          );
          // It may still be applied: the model can no longer be exact for this table's next scans.
          throw err;
        }
        if (attempt % 10 === 0)
          this.log.event('write-retry', {
            table: t.spec.name,
            requestId,
            attempt,
            err: describeError(err).slice(0, 300),
          });
        await sleep(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)));
      }
    }
    t.model.apply(op.entries);
    this.journal.write(
      `${JSON.stringify({ at: Date.now(), table: t.spec.name, requestId, startedAt: started, entries: op.entries })}\n`,
    );
    this.figures.writes++;
    this.figures.entries += op.entries.length;
  }

  /** One write: a handful of entries around one letter of the row space (so mostly one tablet). */
  private makeOp(t: TableState, rng: Rng): Op {
    const letter = rng.pick(LETTERS);
    const op: Op = { entries: [], rowGen: t.rowGen, familyGen: t.familyGen };
    const n = rng.int(1, 8);
    const rows = t.spec.rowsPerLetter ?? ROWS_PER_LETTER;
    const plainRow = (): string => `${letter}${String(rng.int(0, rows - 1)).padStart(3, '0')}`;
    for (let i = 0; i < n; i++) {
      const kind = rng.weighted({
        put: 45,
        overwrite: 22,
        delete: 8,
        older: 8,
        tmpRow: 7,
        family: 5,
        expired: t.spec.ttlMs ? 5 : 0,
      });
      const existing = t.cells.length > 0 ? rng.pick(t.cells) : undefined;
      switch (kind) {
        case 'put': {
          const cell = { row: plainRow(), cf: rng.pick(['a', 'b']), cq: rng.pick(['x', 'y']) };
          const key = cellKey(cell.row, cell.cf, cell.cq);
          if (!t.known.has(key)) {
            t.known.add(key);
            t.cells.push(cell);
          }
          op.entries.push({ ...cell, ts: this.tick() });
          break;
        }
        case 'overwrite':
          if (existing) op.entries.push({ ...existing, ts: this.tick() });
          break;
        case 'delete':
          // Not while a put to the cell is in flight: a full compaction may forget the delete before that
          // put lands, and then the put (older than the delete) shows, as the data model says it does.
          if (existing && !t.puttingTo.has(cellKey(existing.row, existing.cf, existing.cq))) {
            const ts = this.tick();
            t.deletes.set(cellKey(existing.row, existing.cf, existing.cq), ts);
            op.entries.push({ ...existing, ts, delete: true });
          }
          break;
        case 'older':
          if (existing) {
            // Odd timestamps below the clock: never one a plain put or delete used (multiples of 4).
            const key = cellKey(existing.row, existing.cf, existing.cq);
            const ts = this.clock - 4 * rng.int(1, 2_000) - 1;
            const used = t.oldTs.get(key) ?? new Set<number>();
            if (ts > (t.deletes.get(key) ?? -Infinity) && !used.has(ts)) {
              used.add(ts);
              t.oldTs.set(key, used);
              op.entries.push({ ...existing, ts });
            }
          }
          break;
        case 'tmpRow':
          op.entries.push({
            row: `${letter}tmp${t.rowGen}.${String(rng.int(0, 99)).padStart(2, '0')}`,
            cf: 'a',
            cq: 'x',
            ts: this.tick(),
          });
          break;
        case 'family':
          op.entries.push({ row: plainRow(), cf: `s${t.familyGen}`, cq: 'x', ts: this.tick() });
          break;
        case 'expired':
          op.entries.push({ row: plainRow(), cf: 'a', cq: 'y', ts: Date.now() - 60 * DAY - rng.int(0, DAY) });
          break;
      }
    }
    return op;
  }

  /**
   * Scans a table behind a fence and compares it with the model. Resolves the comparison, or undefined
   * when no scan could complete before `deadlineMs` (retried from the start after each failure).
   */
  async scanAndCompare(t: TableState, deadlineMs = 120_000): Promise<Comparison | undefined> {
    const open = await t.fence();
    try {
      // Rows a user compaction is dropping now may or may not be gone in what the scan reads, and may be
      // dropped from the model before the scan ends: they are left out of the comparison.
      const { rowGen, familyGen } = t.dropping;
      const ignore = (row: string, cf: string): boolean =>
        (rowGen !== undefined && row.slice(1).startsWith(`tmp${rowGen}.`)) ||
        (familyGen !== undefined && cf === `s${familyGen}`);
      const first = await this.scanFully(t, ignore, deadlineMs);
      if (!first || (!first.lost && !first.resurrected && !first.wrong)) return first;
      // A mismatch: look again, still behind the fence, to tell a stale read from a lasting one.
      await sleep(2_000);
      const again = await this.scanFully(t, ignore, deadlineMs);
      this.log.event('scan-rescan', { table: t.spec.name, first, again });
      for (const ex of first.examples) {
        const [kind] = ex.split(':') as [string];
        const lasting = again?.examples.includes(ex) ?? false;
        const bucket =
          kind === 'lost'
            ? this.problems.lost
            : kind === 'resurrected'
              ? this.problems.resurrected
              : this.problems.wrong;
        bucket.add(`${t.spec.name} ${ex}${lasting ? '' : ' (gone on a second scan)'}`);
      }
      return first;
    } finally {
      open();
    }
  }

  /** A whole scan of the table compared with the model, retried from the start after a failure. */
  private async scanFully(
    t: TableState,
    ignore: (row: string, cf: string) => boolean,
    deadlineMs: number,
  ): Promise<Comparison | undefined> {
    const started = Date.now();
    for (;;) {
      try {
        const scanned: ScannedEntry[] = [];
        for await (const e of this.cluster.client.scan(t.spec.name)) scanned.push(e);
        this.figures.scans++;
        return t.model.compare(
          scanned.map((e) => ({
            row: e.row.toString(),
            cf: e.cf.toString(),
            cq: e.cq.toString(),
            ts: e.ts,
            value: e.value.toString(),
          })),
          ignore,
        );
      } catch (err) {
        if (Date.now() - started > deadlineMs) {
          this.log.event(
            'scan-failed',
            { table: t.spec.name, err: describeError(err) },
            `scan of ${t.spec.name} failed: ${describeError(err)}`,
          );
          return undefined;
        }
        await sleep(500);
      }
    }
  }

  /**
   * A user compaction with a filter, as an operator would run one: the rows (or the family) of the current
   * generation are retired — writers move to the next — and once the writes using them are in, the table
   * is compacted with a filter dropping them. When it completes, the model drops them too. Now and then
   * instead, a compaction of the files selectors choose (user-compactions.ts), which changes no entry.
   */
  async userCompaction(t: TableState, rng: Rng): Promise<void> {
    if (t.compacting) return;
    t.compacting = true;
    try {
      if (rng.chance(0.3)) {
        await selectedCompaction(this.cluster, this.log, t, rng);
        this.figures.userCompactions++;
        return;
      }
      const byFamily = rng.chance(0.4);
      // Retired under the table's fence, so that no scan is running: every scan either captured the
      // retirement when it began (and leaves those rows out) or began after the model dropped them.
      const open = await t.fence();
      const gen = byFamily ? t.familyGen++ : t.rowGen++;
      t.dropping = byFamily ? { familyGen: gen } : { rowGen: gen };
      open();
      // Wait for the writes that may carry the retired generation (no new one will).
      await Promise.all(
        [...t.inflight]
          .filter((f) => (byFamily ? f.op.familyGen === gen : f.op.rowGen === gen))
          .map((f) => f.done),
      );
      const prefixes = LETTERS.map((l) => `${l}tmp${gen}.`);
      const filter = byFamily
        ? `dropFamily:${JSON.stringify({ families: [`s${gen}`] })}`
        : `dropRowPrefix:${JSON.stringify({ prefixes })}`;
      const id = await requestCompaction(this.cluster, this.log, t, ['--filter', filter]);
      this.log.event(
        'user-compaction',
        { table: t.spec.name, id, filter },
        `user compaction ${id} of ${t.spec.name} (${byFamily ? `family s${gen}` : `rows *tmp${gen}.`})`,
      );
      await followCompaction(this.cluster, this.log, t, id);
      if (byFamily) t.model.dropFamilies([`s${gen}`]);
      else t.model.dropRowPrefixes(prefixes);
      this.figures.userCompactions++;
      this.log.event('user-compaction-done', { table: t.spec.name, id });
    } finally {
      t.dropping = {};
      t.compacting = false;
    }
  }
}
