/**
 * Garbage collection of tablet files: the collector's cycle, its claims and its fence.
 *
 * A file may be deleted only when no tablet references it (which files those are: gc-plan.ts). A cycle
 * knows them without reading the tablets: an index kept by the mutations the manager applies answers
 * (gc-index.ts), checked against a full read of the store at every sweep. Two sources of garbage:
 *   - `~del:<path>` rows, written when a commit replaces inputs, when a reservation is cancelled (its
 *     output), and when a table is deleted. Once the row is older than the grace period and the file is
 *     unreferenced, the file is deleted, then the row.
 *   - leftovers of crashes (an ingest or a compaction output written but never added, checkpoint parts
 *     nothing names): a sweep lists the store under `tables/` and deletes unreferenced files last
 *     modified longer ago than the grace period.
 *     A listing reads every object's name, so it runs far less often than the collection of `~del` rows
 *     (`EXC_GC_SWEEP_INTERVAL_MS`, and on every cycle run on request): leftovers are rare, replaced files
 *     are the bulk of the garbage, and a store of millions of objects is not listed every minute.
 *
 * The grace period is also what protects a scan that is still reading a file a commit just replaced
 * (scans are bounded well below it), and a file written moments ago whose mutation is in flight. It must
 * be much longer than the ZooKeeper session timeout: a paused tablet server holding an unregistered file
 * is fenced once its session expires, before the grace period ends.
 *
 * Fencing. A manager paused past its session (or cut off from ZooKeeper) is replaced, and may resume
 * believing it is still active: it must not delete anything from then on. Its metadata writes fail on
 * the epoch check (store.ts), but deletes in the object store are not metadata writes, so the collector
 * fences them itself: it claims each batch of files with a conditional mutation under its epoch
 * (deletions.ts) before deleting any, and reads the store's epoch again right before every single delete,
 * stopping at the first that is not its own. A manager resumed after its successor took the store over
 * therefore deletes nothing. The one window left is a pause that lands inside the object store client,
 * after that check and before the request has left the process: such a delete goes out after the resume,
 * at most one per delete in flight, and deletes a claimed file, which nothing references or may ever
 * reference again — harmless.
 */
import type { Logger } from '../log.js';
import { DONE_PREFIX } from '../meta/outcomes.js';
import { UCOMP_PREFIX } from '../meta/user-compactions.js';
import { TABLES_PREFIX } from '../meta/paths.js';
import type { MetaBackend } from '../meta/backend.js';
import type { TemporaryInfo, TemporarySweepOptions } from '../storage/object-store.js';
import { ofOutputBeingWritten } from '../storage/index.js';
import { ExcError, describeError } from '../errors.js';
import type { Mutation } from '../meta/types.js';
import type { CommitQueue } from './commit-queue.js';
import {
  claimMutation,
  claimOf,
  dropMutation,
  markProblem,
  readMarks,
  type DeletionMark,
} from './deletions.js';
import { expiredRecords } from './expiry.js';
import { expiredRequests } from './requests.js';
import { deleteClaimed } from './gc-delete.js';
import { planGc } from './gc-plan.js';
import { ReferenceIndex, type ReferenceTable } from './gc-index.js';
import { logCheck } from './followed-index.js';

/** What the collector needs of an object store (any ObjectStore fits). */
export interface GcObjectStore {
  list(prefix: string): AsyncIterable<{ name: string; size: number; modifiedMs: number }>;
  delete(name: string): Promise<void>;
  /** Stores whose writes leave temporary files behind on a crash (the local store) clean them up. */
  sweepTemporaries?(prefix: string, olderThanMs: number, options?: TemporarySweepOptions): Promise<number>;
  /** Not used by the collector: the consistency check (check-read.ts) reports leftovers with it. */
  listTemporaries?(prefix: string): AsyncIterable<TemporaryInfo>;
}

export interface GcOptions {
  graceMs: number;
  intervalMs: number;
  /** The manager epoch this collector works under: it deletes nothing once the store is held by another. */
  epoch: number;
  /** Sweep the store for leftovers at most this often (default 0: every cycle); see the top of the file. */
  sweepIntervalMs?: number;
  /** Trim compaction outcome rows older than this (default: keep them). */
  outcomeRetentionMs?: number;
  /** Keep at most this many outcome rows: the oldest beyond it are trimmed too (default: no limit). */
  outcomeMaxRows?: number;
  /**
   * The mutation that trims outcome rows, folding their counts into the durable totals (outcome-counts.ts);
   * default: just delete them.
   */
  foldOutcomes?: (rows: readonly string[]) => Promise<Mutation>;
  /** Files claimed, then deleted, per batch (default 100). */
  batchSize?: number;
  /** Deletes in flight at once (default 8). */
  concurrency?: number;
}

export interface GcStats {
  cycles: number;
  deleted: number;
  lastCycleAt: number;
  /** `~del` rows the last cycle skipped because they cannot be acted on (see markProblem). */
  badMarks: number;
  /** Deletes the object store refused (each file is tried again by later cycles). */
  failedDeletes: number;
  /** Sweeps that found the reference index different from the store (a bug; each one repaired). */
  indexMismatches: number;
  lastError?: string;
}

export class GarbageCollector {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Aborts the cycle in flight (stop, or the fence found broken). */
  private aborter: AbortController | undefined;
  private stopped = false;
  private cycleSeq = 0;
  /** When the last sweep listed the store (0: never), and whether the cycle in flight sweeps. */
  private lastSweepAt = 0;
  private sweeping = false;
  readonly stats: GcStats = {
    cycles: 0,
    deleted: 0,
    lastCycleAt: 0,
    badMarks: 0,
    failedDeletes: 0,
    indexMismatches: 0,
  };
  /** What the tablets reference, kept by the mutations the manager applies. */
  private readonly index: ReferenceIndex;
  /** Bad marks already logged: each is logged once per process, not once per cycle. */
  private readonly reportedBad = new Set<string>();

  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly objects: GcObjectStore,
    private readonly options: GcOptions,
    private readonly log: Logger,
    /** Called once when the collector finds its manager fenced (a newer epoch holds the store). */
    private readonly onFenced?: (err: ExcError) => void,
  ) {
    this.index = new ReferenceIndex(store, commits, options.epoch);
  }

  start(): void {
    this.timer = setInterval(() => void this.runCycle(), this.options.intervalMs);
    this.timer.unref();
  }

  /**
   * Stops collecting: the cycle in flight is aborted — it starts no further delete, and stops waiting for
   * the ones in flight — and this resolves once it has unwound.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.index.stop();
    this.aborter?.abort(new ExcError('SHUTTING_DOWN', 'garbage collector stopped'));
    await this.running?.catch(() => undefined);
  }

  /**
   * Runs one cycle now (or joins the one running). With `sweep`, the cycle also sweeps the store for
   * leftovers whenever the last sweep was (a cycle in flight that does not sweep is followed by one that
   * does).
   */
  async runCycle(options: { sweep?: boolean } = {}): Promise<void> {
    if (this.running && options.sweep && !this.sweeping) await this.running;
    return this.startCycle(options.sweep ?? false);
  }

  private startCycle(forceSweep: boolean): Promise<void> {
    if (this.stopped) return Promise.reject(new ExcError('SHUTTING_DOWN', 'garbage collector stopped'));
    if (this.running) return this.running;
    const aborter = new AbortController();
    this.aborter = aborter;
    this.sweeping = forceSweep || Date.now() - this.lastSweepAt >= (this.options.sweepIntervalMs ?? 0);
    this.running = this.cycle(aborter.signal, this.sweeping)
      .catch((err: unknown) => {
        this.stats.lastError = describeError(err);
        if (aborter.signal.aborted) this.log.info({ err: describeError(err) }, 'garbage collection stopped');
        else this.log.warn({ err: describeError(err) }, 'garbage collection cycle failed');
      })
      .finally(() => {
        this.running = undefined;
        this.aborter = undefined;
        this.sweeping = false;
      });
    return this.running;
  }

  private async cycle(signal: AbortSignal, sweep: boolean): Promise<void> {
    const claim = claimOf(this.options.epoch, ++this.cycleSeq);
    const startedAt = Date.now();
    // Order matters. List the store first: an object written later is not considered at all. Take the
    // references next (the index as of the last applied batch), and read the `~del` rows last: a file that stops being referenced after the reference
    // read has its `~del` row written in the same mutation, so the last read sees it and its grace period
    // applies (a sweep would otherwise delete a just-replaced input by its old modification time).
    const objects = sweep ? await this.listObjects(signal) : undefined;
    if (sweep) this.lastSweepAt = startedAt;
    const { referenced, writing } = await this.references(sweep).catch((err: unknown) => {
      // The index refuses a snapshot of a store a newer epoch holds: this collector is fenced.
      throw err instanceof ExcError && err.code === 'NOT_MANAGER' ? this.fenced(err) : err;
    });
    if (sweep && this.objects.sweepTemporaries) {
      // Temporary files are not objects: nothing names them, so they need no claim. The sweep removes only
      // files no write has touched for a grace period, and none of an output a reservation is writing
      // (read above) — but a manager paused past the grace after that read may find an old one of a
      // reservation its successor made meanwhile: the fence is checked right before every delete, as for
      // objects, and the cycle's abort stops the walk.
      const removed = await this.objects.sweepTemporaries(TABLES_PREFIX, this.options.graceMs, {
        keep: (target) => ofOutputBeingWritten(target, writing),
        signal,
        beforeDelete: () => this.checkFence(signal),
      });
      if (removed > 0) this.log.info({ removed }, 'removed temporary files of unfinished writes');
    }
    const marks = this.usableMarks(await readMarks(this.store));
    const deletions = new Map([...marks].map(([file, mark]) => [file, mark.at]));
    const plan = planGc({
      now: Date.now(),
      graceMs: this.options.graceMs,
      referenced,
      writing,
      deletions,
      objects,
    });
    for (const file of plan.stillReferenced) {
      this.log.warn({ file }, 'a file marked for deletion is still referenced; keeping it');
    }
    const batchSize = this.options.batchSize ?? 100;
    let deleted = 0;
    for (let i = 0; i < plan.deleteFiles.length; i += batchSize) {
      const batch = plan.deleteFiles.slice(i, i + batchSize);
      const claimed = await this.claim(batch, marks, objects, claim, signal);
      const gone = await deleteClaimed(claimed, signal, {
        objects: this.objects,
        concurrency: this.options.concurrency ?? 8,
        checkFence: () => this.checkFence(signal),
        stats: this.stats,
        log: this.log,
      });
      deleted += gone.length;
      // Only the rows of files actually deleted: a file that could not be keeps its claimed mark, and a
      // later cycle takes the claim over and tries again.
      if (gone.length > 0) {
        await this.commits.submit({ mutations: gone.map((file) => dropMutation(file, claim)) });
      }
    }
    if (deleted > 0) this.log.info({ deleted }, 'garbage collected files');
    await this.checkFence(signal);
    const fold = this.options.foldOutcomes;
    // Past their retention: the oldest rows, read until the first one kept. Beyond the row limit: that
    // needs them all counted, which grows with the rows kept, so only on a sweep (once the chaos soak's
    // outcome rows reached tens of thousands, counting them every cycle cost the manager more and more).
    const maxRows = sweep ? this.options.outcomeMaxRows : undefined;
    const records = {
      ...(this.options.outcomeRetentionMs === undefined
        ? {}
        : { retentionMs: this.options.outcomeRetentionMs }),
      ...(maxRows === undefined ? {} : { maxRows }),
      now: Date.now(),
    };
    await this.trimRows(await expiredRecords(this.store, DONE_PREFIX, records), fold);
    await this.trimRows(await expiredRecords(this.store, UCOMP_PREFIX, records));
    await this.trimRows(await expiredRequests(this.store, Date.now()));
    this.stats.cycles++;
    this.stats.lastCycleAt = Date.now();
  }

  /**
   * What the tablets reference now, from the index (gc-index.ts): no read of the tablets. A sweep first
   * checks the index against the store — built again from a snapshot, the two must be equal — and takes
   * the rebuilt one: the one full read of the tablets, once per sweep.
   */
  private async references(sweep: boolean): Promise<ReferenceTable> {
    if (sweep) {
      const differences = await this.index.verify();
      this.stats.indexMismatches = this.index.stats.mismatches;
      const explained = differences?.length ? (this.index.lastDifferences ?? differences) : differences;
      logCheck(this.log, 'reference index', explained, this.index.size);
    }
    const table = await this.index.current();
    const [unreadable] = table.unreadable;
    if (unreadable) {
      throw new ExcError('INTERNAL', `cannot tell what is referenced: ${unreadable[1]}`, {
        details: { cell: unreadable[0], cells: table.unreadable.size },
      });
    }
    return table;
  }

  /**
   * The marks this cycle may act on. A bad one (a name no store accepts, a file outside `tables/`, a
   * mangled time) is skipped and reported — counted in the stats (`excompact_gc_bad_deletion_marks`),
   * logged once, listed by `admin check` — so that one bad row cannot stop the collection of all the
   * others. Its row stays for an operator to look at.
   */
  private usableMarks(marks: Map<string, DeletionMark>): Map<string, DeletionMark> {
    let bad = 0;
    for (const [file, mark] of marks) {
      const problem = markProblem(file, mark);
      if (problem === null) continue;
      marks.delete(file);
      bad++;
      if (!this.reportedBad.has(file)) {
        this.reportedBad.add(file);
        this.log.warn(
          { row: `~del:${file.slice(0, 200)}`, problem },
          'skipping a deletion mark that cannot be acted on; remove or fix the row',
        );
      }
    }
    this.stats.badMarks = bad;
    return marks;
  }

  /** Claims `files` under this cycle's claim; resolves with those claimed (a mark that changed is skipped). */
  private async claim(
    files: string[],
    marks: ReadonlyMap<string, DeletionMark>,
    objects: ReadonlyMap<string, number> | undefined,
    claim: string,
    signal: AbortSignal,
  ): Promise<string[]> {
    await this.checkFence(signal);
    const results = await this.commits.submit({
      mutations: files.map((file) =>
        claimMutation(file, marks.get(file), claim, objects?.get(file) ?? Date.now()),
      ),
    });
    return files.filter((_, i) => results[i]?.applied);
  }

  /**
   * Throws unless this collector may delete now: not stopped, and the store still held by its epoch. The
   * epoch is read from the file (one indexed read): the successor's takeover is the first thing it writes.
   */
  private async checkFence(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const held = await this.store.storedEpoch();
    if (held === this.options.epoch) return;
    throw this.fenced(
      new ExcError(
        'NOT_MANAGER',
        `garbage collector fenced: the metadata store is held by epoch ${held}, not ${this.options.epoch}`,
        { details: { epoch: this.options.epoch, heldBy: held } },
      ),
    );
  }

  /** Stops this cycle for good and tells the manager: a newer epoch holds the store. Returns `err`. */
  private fenced(err: ExcError): ExcError {
    this.aborter?.abort(err);
    this.onFenced?.(err);
    return err;
  }

  private async trimRows(
    rows: string[],
    mutation: (rows: readonly string[]) => Mutation | Promise<Mutation> = (batch) => ({
      deleteRows: [...batch],
    }),
  ): Promise<void> {
    for (let i = 0; i < rows.length; i += 1_000) {
      await this.commits.submit({ mutations: [await mutation(rows.slice(i, i + 1_000))] });
    }
  }

  private async listObjects(signal: AbortSignal): Promise<Map<string, number>> {
    const objects = new Map<string, number>();
    for await (const o of this.objects.list(TABLES_PREFIX)) {
      signal.throwIfAborted();
      objects.set(o.name, o.modifiedMs);
    }
    return objects;
  }
}
