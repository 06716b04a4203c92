/**
 * Group commit: mutations that arrive while a batch is being made durable are applied together as the
 * next batch, in arrival order, in one SQLite transaction (one fsync), and each caller gets its own
 * results. Batches go to the writer one at a time, in order, so each sees the effects of the previous.
 *
 * A submission from a tablet server names its ZooKeeper session (`fence`); it is rejected whole with
 * FENCED unless that session still holds the server's ephemeral node at the moment the batch is applied.
 * Together with the `loc` conditions in every tablet mutation this keeps a tablet server that lost its
 * session from changing anything, even before the manager has cleared its tablets. While the manager
 * cannot tell (it is disconnected from ZooKeeper itself, so its view of live sessions may be old), such
 * a submission is refused with UNAVAILABLE, unapplied: the tablet server tries again.
 */
import { ExcError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Fence } from '../meta/tablet.js';
import type { BatchWriter } from '../meta/writer.js';
import { mutationSchema, type Cell, type Mutation, type MutationResult } from '../meta/types.js';
import { parseInput } from '../validate.js';

export interface Submission {
  mutations: Mutation[];
  fence?: Fence;
}

interface Pending extends Submission {
  resolve: (results: MutationResult[]) => void;
  reject: (err: unknown) => void;
}

/** A row an applied mutation changed: the columns it put or deleted ('*': the whole row), and by whom. */
export interface RowChange {
  row: string;
  cols: string[];
  /** The tablet server that sent the mutation (its fence); none for the manager's own. */
  origin?: string;
}

/**
 * Called after each batch, in the order the batches committed, with the rows that applied mutations wrote
 * (puts), the rows that got a new `loc` (a tablet just hosted) — to wake compactors waiting for work —,
 * every row changed, by whom (the change feed and the assigner follow those), and the applied mutations
 * themselves, in order (the collector's reference index replays them).
 */
export type AppliedListener = (changes: {
  written: Set<string>;
  hosted: Set<string>;
  puts: Cell[];
  changed: RowChange[];
  applied: Mutation[];
}) => void;

const MAX_BATCH_MUTATIONS = 2_000;
const MAX_IN_FLIGHT = 2;

export class CommitQueue {
  private pending: Pending[] = [];
  private scheduled = false;
  /** Batches handed to the writer and not yet settled (at most {@link MAX_IN_FLIGHT}). */
  private inFlight = 0;
  /** Pauses in force ({@link pause}): no batch goes to the writer while there is one. */
  private paused = 0;
  /** Told when the last batch in flight has settled. */
  private idle: (() => void)[] = [];
  private readonly listeners = new Set<AppliedListener>();
  /** Told of every batch that failed: it may have committed all the same (an answer lost). */
  private readonly uncertainListeners = new Set<() => void>();
  /** Statistics for /status and the benchmark. */
  readonly stats = { batches: 0, mutations: 0 };

  constructor(
    private readonly writer: BatchWriter,
    /** Whether the fence's session holds the server's node; undefined when that cannot be known now. */
    private readonly isLive: (fence: Fence) => boolean | undefined,
    private readonly log: Logger,
    private readonly onFenced?: (err: ExcError) => void,
  ) {}

  /**
   * Queues a submission for the next group commit. Its mutations are validated here, so a malformed one
   * fails only its own caller; `validated` skips that for mutations already checked by the API schema.
   */
  async submit(submission: Submission & { validated?: boolean }): Promise<MutationResult[]> {
    if (!submission.validated) {
      submission = {
        ...submission,
        mutations: submission.mutations.map((m, i) => parseInput(mutationSchema, m, `mutations.${i}`)),
      };
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ ...submission, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  onApplied(listener: AppliedListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * `listener` is called whenever a batch fails: whether it committed is not known (the store's answer
   * may have been lost after the commit), so a listener that follows every applied mutation must read
   * the store again.
   */
  onUncertain(listener: () => void): () => void {
    this.uncertainListeners.add(listener);
    return () => this.uncertainListeners.delete(listener);
  }

  /**
   * Holds back new batches until the returned function is called, and resolves once every batch already
   * at the writer has settled and its listeners were told. Until it resumes, the store holds exactly the
   * batches the listeners were told of: a followed index opens its snapshot there (followed-index.ts), so
   * that no batch is in the snapshot and still to be told, or told and not in it.
   */
  async pause(): Promise<() => void> {
    this.paused++;
    while (this.inFlight > 0) await new Promise<void>((told) => this.idle.push(told));
    let resumed = false;
    return () => {
      if (resumed) return;
      resumed = true;
      this.paused--;
      this.flush();
    };
  }

  private flush(): void {
    this.scheduled = false;
    if (this.paused > 0) return;
    // Pipelined group commit: while the writer makes one batch durable, the next is already queued at the
    // writer (so it starts the moment the first is done) and a third fills up here. The writer applies
    // batches in order, so each sees the effects of the one before.
    if (this.inFlight >= MAX_IN_FLIGHT || this.pending.length === 0) return;
    const batch: Pending[] = [];
    let size = 0;
    while (
      this.pending.length > 0 &&
      (batch.length === 0 || size + this.pending[0]!.mutations.length <= MAX_BATCH_MUTATIONS)
    ) {
      const next = this.pending.shift()!;
      size += next.mutations.length;
      batch.push(next);
    }

    const accepted: Pending[] = [];
    for (const sub of batch) {
      const live = sub.fence ? this.isLive(sub.fence) : true;
      if (live === undefined) {
        sub.reject(
          new ExcError(
            'UNAVAILABLE',
            'the manager cannot check tablet server sessions right now; try again',
            {
              details: { sent: false },
            },
          ),
        );
      } else if (!live && sub.fence) {
        sub.reject(
          new ExcError(
            'FENCED',
            `tablet server ${sub.fence.server} session ${sub.fence.session} is not live`,
            {
              details: { server: sub.fence.server, session: sub.fence.session },
            },
          ),
        );
      } else {
        accepted.push(sub);
      }
    }
    if (accepted.length === 0) {
      this.flush();
      return;
    }
    this.inFlight++;
    this.writer
      .apply(accepted.flatMap((s) => s.mutations))
      .then(
        (results) => this.settle(accepted, results),
        (err: unknown) => {
          for (const listener of this.uncertainListeners) listener();
          for (const sub of accepted) sub.reject(err);
          if (err instanceof ExcError && err.code === 'NOT_MANAGER') this.onFenced?.(err);
          else this.log.error({ err }, 'metadata batch failed');
        },
      )
      .finally(() => {
        this.inFlight--;
        if (this.inFlight === 0) for (const told of this.idle.splice(0)) told();
        this.flush();
      });
  }

  private settle(accepted: Pending[], results: MutationResult[]): void {
    this.stats.batches++;
    this.stats.mutations += results.length;
    const written = new Set<string>();
    const hosted = new Set<string>();
    const puts: Cell[] = [];
    const changed: RowChange[] = [];
    const applied: Mutation[] = [];
    let offset = 0;
    for (const sub of accepted) {
      const mine = results.slice(offset, offset + sub.mutations.length);
      const origin = sub.fence?.server;
      sub.mutations.forEach((m, i) => {
        if (!mine[i]?.applied) return;
        applied.push(m);
        const cols = new Map<string, string[]>();
        const touch = (row: string, col: string) => {
          const list = cols.get(row);
          if (list) list.push(col);
          else cols.set(row, [col]);
        };
        for (const p of m.puts ?? []) {
          puts.push(p);
          written.add(p.row);
          if (p.col === 'loc') hosted.add(p.row);
          touch(p.row, p.col);
        }
        for (const d of m.deletes ?? []) touch(d.row, d.col);
        for (const row of m.deleteRows ?? []) touch(row, '*');
        for (const [row, list] of cols)
          changed.push(origin ? { row, cols: list, origin } : { row, cols: list });
      });
      offset += sub.mutations.length;
      sub.resolve(mine);
    }
    if (changed.length === 0) return;
    for (const listener of this.listeners) {
      // The callers have their results already; a listener that fails (one reading the store as it
      // closes during shutdown) must not become an unhandled rejection, nor keep the others from running.
      try {
        listener({ written, hosted, puts, changed, applied });
      } catch (err) {
        this.log.warn({ err: describeError(err) }, 'listener of applied mutations failed');
      }
    }
  }
}
