/**
 * The chaos run's workload: continuous ingest into every table (the writes of ops.ts, counters on the
 * table that sums them) with an exact model of each table; scans behind a write fence; user compactions
 * with filters or selectors now and then.
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
import type { Comparison } from './model.js';
import type { ChaosLog } from './report.js';
import type { Rng } from './rng.js';
import { TableState, type Op, type TableSpec } from './tables.js';
import { LETTERS, makeOp, WriteClock } from './ops.js';
import { followCompaction, requestCompaction, selectedCompaction } from './user-compactions.js';

/** How long a write is retried (under its request id) before the run calls it stuck. */
const WRITE_DEADLINE_MS = 10 * 60_000;

export interface WorkloadFigures {
  writes: number;
  entries: number;
  scans: number;
  userCompactions: number;
  stuckWrites: number;
  /** The counters the last scan of the counting table checked, and what the model saw of them. */
  counters?: { checked: number; increments: number; resets: number };
}

export class Workload {
  readonly tables: TableState[];
  readonly figures: WorkloadFigures = { writes: 0, entries: 0, scans: 0, userCompactions: 0, stuckWrites: 0 };
  /** Problems found by scans, by kind, as distinct table/key strings. */
  readonly problems = { lost: new Set<string>(), resurrected: new Set<string>(), wrong: new Set<string>() };
  private readonly clock = new WriteClock();
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
      for (const it of t.spec.iterators ?? [])
        await this.cluster.cli([
          'admin',
          'table',
          'iterator',
          'add',
          t.spec.name,
          it.name,
          JSON.stringify(it.options),
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

  private async writeOnce(rng: Rng): Promise<void> {
    const table = rng.weighted(Object.fromEntries(this.tables.map((t, i) => [String(i), t.spec.weight])));
    const t = this.tables[Number(table)]!;
    await t.track(
      () => this.running,
      () => makeOp(t, rng, this.clock),
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
      () => ({
        entries: importEntries(pick, () => this.clock.tick()),
        rowGen: t.rowGen,
        familyGen: t.familyGen,
      }),
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
    const rows = op.entries.map((e) => {
      // A counter's entries are stamped by the tablet server (counters.ts).
      if (t.model.counters?.holds(e.cf))
        return {
          row: e.row,
          cf: e.cf,
          cq: e.cq,
          ...(e.delete ? { delete: true } : { value: String(e.delta) }),
        };
      return { ...e, ...(e.delete ? {} : { value: t.model.valueOf(e.row, e.cf, e.cq, e.ts) }) };
    });
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
        const counters = t.model.counters;
        const result = t.model.compare(
          scanned.map((e) => ({
            row: e.row.toString(),
            cf: e.cf.toString(),
            cq: e.cq.toString(),
            ts: e.ts,
            value: e.value.toString(),
          })),
          ignore,
        );
        if (counters)
          this.figures.counters = {
            checked: result.counters ?? 0,
            increments: counters.increments,
            resets: counters.resets,
          };
        return result;
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
