/**
 * Garbage collection of tablet files.
 *
 * A file may be deleted only when no tablet references it: not as one of its files, nor as an input or the
 * output of one of its reservations. Two sources of garbage:
 *   - `~del:<path>` rows, written when a commit replaces inputs, when a reservation is cancelled (its
 *     output), and when a table is deleted. Once the row is older than the grace period and the file is
 *     unreferenced, the file is deleted, then the row.
 *   - leftovers of crashes (an ingest or a compaction output written but never added): a sweep lists the
 *     store under `tables/` and deletes unreferenced files last modified longer ago than the grace period.
 *
 * The grace period is also what protects a scan that is still reading a file a commit just replaced
 * (scans are bounded well below it), and a file written moments ago whose mutation is in flight. It must
 * be much longer than the ZooKeeper session timeout: a paused tablet server holding an unregistered file
 * is fenced once its session expires, before the grace period ends.
 *
 * The decision is a pure function ({@link planGc}) so it can be checked against random histories.
 */
import type { Logger } from '../log.js';
import { ALL_TABLETS, DEL_PREFIX, delRow } from '../meta/keys.js';
import { DONE_PREFIX } from '../meta/outcomes.js';
import { TABLES_PREFIX } from '../meta/paths.js';
import { ulidTime } from '../ids.js';
import type { MetaStore } from '../meta/store.js';
import type { TemporaryInfo } from '../storage/object-store.js';
import { describeError } from '../errors.js';
import type { CommitQueue } from './commit-queue.js';
import { readTablets } from './tables.js';

/** What the collector needs of an object store (any ObjectStore fits). */
export interface GcObjectStore {
  list(prefix: string): AsyncIterable<{ name: string; size: number; modifiedMs: number }>;
  delete(name: string): Promise<void>;
  /** Stores whose writes leave temporary files behind on a crash (the local store) clean them up. */
  sweepTemporaries?(prefix: string, olderThanMs: number): Promise<number>;
  /** Not used by the collector: the consistency check (check-read.ts) reports leftovers with it. */
  listTemporaries?(prefix: string): AsyncIterable<TemporaryInfo>;
}

export interface GcInput {
  now: number;
  graceMs: number;
  /** Files some tablet references (files, reservation inputs and outputs). */
  referenced: ReadonlySet<string>;
  /** `~del` rows: file → time the row was written. */
  deletions: ReadonlyMap<string, number>;
  /** Objects found under the tables prefix: name → last modified. Undefined when the sweep is skipped. */
  objects?: ReadonlyMap<string, number>;
}

export interface GcPlan {
  /** Files to delete from the store. */
  deleteFiles: string[];
  /** `~del` rows to remove after their files are deleted. */
  dropRows: string[];
  /** `~del` rows naming a referenced file (left alone, reported). */
  stillReferenced: string[];
}

export function planGc(input: GcInput): GcPlan {
  const deleteFiles = new Set<string>();
  const dropRows: string[] = [];
  const stillReferenced: string[] = [];
  for (const [file, at] of input.deletions) {
    if (input.referenced.has(file)) {
      stillReferenced.push(file);
      continue;
    }
    if (input.now - at < input.graceMs) continue;
    deleteFiles.add(file);
    dropRows.push(file);
  }
  for (const [name, modifiedMs] of input.objects ?? []) {
    if (input.referenced.has(name) || input.deletions.has(name)) continue;
    if (input.now - modifiedMs < input.graceMs) continue;
    deleteFiles.add(name);
  }
  return { deleteFiles: [...deleteFiles], dropRows, stillReferenced };
}

export interface GcOptions {
  graceMs: number;
  intervalMs: number;
  /** Sweep the store for leftovers every this many cycles (default 1: every cycle). */
  sweepEvery?: number;
  /** Trim compaction outcome rows older than this (default: keep them). */
  outcomeRetentionMs?: number;
}

export interface GcStats {
  cycles: number;
  deleted: number;
  lastCycleAt: number;
  lastError?: string;
}

export class GarbageCollector {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  readonly stats: GcStats = { cycles: 0, deleted: 0, lastCycleAt: 0 };

  constructor(
    private readonly store: MetaStore,
    private readonly commits: CommitQueue,
    private readonly objects: GcObjectStore,
    private readonly options: GcOptions,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runCycle(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Runs one cycle now (or joins the one running). */
  runCycle(): Promise<void> {
    this.running ??= this.cycle()
      .catch((err: unknown) => {
        this.stats.lastError = describeError(err);
        this.log.warn({ err: describeError(err) }, 'garbage collection cycle failed');
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async cycle(): Promise<void> {
    const sweep = this.stats.cycles % (this.options.sweepEvery ?? 1) === 0;
    // Order matters. List the store first: an object written later is not considered at all. Read the
    // references next, and the `~del` rows last: a file that stops being referenced after the reference
    // read has its `~del` row written in the same mutation, so the last read sees it and its grace period
    // applies (a sweep would otherwise delete a just-replaced input by its old modification time).
    const objects = sweep ? await this.listObjects() : undefined;
    if (sweep && this.objects.sweepTemporaries) {
      const removed = await this.objects.sweepTemporaries(TABLES_PREFIX, this.options.graceMs);
      if (removed > 0) this.log.info({ removed }, 'removed temporary files of unfinished writes');
    }
    const referenced = this.readReferences();
    const deletions = this.readDeletions();
    const plan = planGc({ now: Date.now(), graceMs: this.options.graceMs, referenced, deletions, objects });
    for (const file of plan.stillReferenced) {
      this.log.warn({ file }, 'a file marked for deletion is still referenced; keeping it');
    }
    for (const file of plan.deleteFiles) {
      await this.objects.delete(file);
      this.stats.deleted++;
    }
    if (plan.dropRows.length > 0) {
      await this.commits.submit({ mutations: plan.dropRows.map((file) => ({ deleteRows: [delRow(file)] })) });
    }
    if (plan.deleteFiles.length > 0)
      this.log.info({ deleted: plan.deleteFiles.length }, 'garbage collected files');
    await this.trimOutcomes();
    this.stats.cycles++;
    this.stats.lastCycleAt = Date.now();
  }

  /** Drops outcome rows past their retention (ULIDs start with their time, so the old ones come first). */
  private async trimOutcomes(): Promise<void> {
    const retention = this.options.outcomeRetentionMs;
    if (retention === undefined) return;
    const cutoff = Date.now() - retention;
    const old: string[] = [];
    for (const row of this.store.scanRows({ prefix: DONE_PREFIX })) {
      if (ulidTime(row.row.slice(DONE_PREFIX.length)) >= cutoff) break;
      old.push(row.row);
    }
    for (let i = 0; i < old.length; i += 1_000) {
      await this.commits.submit({ mutations: [{ deleteRows: old.slice(i, i + 1_000) }] });
    }
  }

  private async listObjects(): Promise<Map<string, number>> {
    const objects = new Map<string, number>();
    for await (const o of this.objects.list(TABLES_PREFIX)) objects.set(o.name, o.modifiedMs);
    return objects;
  }

  private readDeletions(): Map<string, number> {
    const out = new Map<string, number>();
    for (const c of this.store.scanAll({ prefix: DEL_PREFIX })) {
      out.set(c.row.slice(DEL_PREFIX.length), Number(c.value));
    }
    return out;
  }

  /** Everything any tablet references. One consistent read per page; see the module comment. */
  private readReferences(): Set<string> {
    const referenced = new Set<string>();
    for (const tablet of readTablets(this.store, ALL_TABLETS.start, ALL_TABLETS.end)) {
      for (const file of tablet.files.keys()) referenced.add(file);
      for (const r of tablet.reservations.values()) {
        referenced.add(r.output);
        for (const input of r.inputs) referenced.add(input);
      }
    }
    return referenced;
  }
}
