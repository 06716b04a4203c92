/**
 * Who applies batches of validated mutations to the metadata store: the manager's group commit hands
 * them to a {@link BatchWriter}. {@link WorkerWriter} (what the manager runs on SQLite) applies them on a
 * writer thread; {@link BackendWriter} through an asynchronous backend (PostgreSQL, where the database
 * serializes writers); {@link InlineWriter} on the caller's thread (tools and tests).
 */
import { Worker } from 'node:worker_threads';
import { ExcError, isErrorCode } from '../errors.js';
import { backoffDelay, sleep } from '../retry.js';
import type { MetaBackend } from './backend.js';
import type { MetaStore } from './store.js';
import type { Mutation, MutationResult } from './types.js';

export interface TakeOverOptions {
  /**
   * Told of each failed attempt the takeover tries again: the store's lock held by another process, the
   * store out of reach, an attempt whose outcome is unknown.
   */
  onLocked?: (err: ExcError) => void;
  signal?: AbortSignal;
}

export interface BatchWriter {
  /** Takes the store over for a new manager epoch (fencing older holders); resolves with the epoch. */
  takeOver(options?: TakeOverOptions): Promise<number>;
  /** Applies validated mutations in one transaction. */
  apply(mutations: Mutation[]): Promise<MutationResult[]>;
  close(): Promise<void>;
}

export class InlineWriter implements BatchWriter {
  constructor(private readonly store: MetaStore) {}
  async takeOver(): Promise<number> {
    return this.store.takeOver();
  }
  async apply(mutations: Mutation[]): Promise<MutationResult[]> {
    return this.store.applyBatch(mutations, { validated: true });
  }
  async close(): Promise<void> {
    this.store.close();
  }
}

interface Reply {
  id: number;
  epoch?: number;
  results?: MutationResult[];
  closed?: boolean;
  error?: { code: string; message: string };
}

export class WorkerWriter implements BatchWriter {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: unknown) => void }>();
  /** Set once the thread is gone (or failed): every request from then on is refused with it. */
  private ended: (() => ExcError) | undefined;
  private closing = false;

  /** `script` is the writer thread's module (tests run the compiled one). */
  constructor(
    path: string,
    script: URL = new URL('./write-worker.js', import.meta.url),
    options: { busyTimeoutMs?: number } = {},
  ) {
    this.worker = new Worker(script, { workerData: { path, ...options } });
    this.worker.on('message', (reply: Reply) => {
      const w = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (!w) return;
      if (reply.error) {
        w.reject(
          new ExcError(isErrorCode(reply.error.code) ? reply.error.code : 'INTERNAL', reply.error.message),
        );
      } else w.resolve(reply);
    });
    const end = (refusal: () => ExcError): void => {
      this.ended ??= refusal;
      for (const w of this.waiting.values()) w.reject(this.ended());
      this.waiting.clear();
    };
    this.worker.on('error', (err) =>
      end(() => new ExcError('INTERNAL', `metadata writer failed: ${err.message}`, { cause: err })),
    );
    // On every exit, not only while a request waits: a request sent to a thread that is gone would
    // never be answered.
    this.worker.on('exit', (code) =>
      end(() =>
        this.closing
          ? new ExcError('SHUTTING_DOWN', 'metadata writer is closed')
          : new ExcError('INTERNAL', `metadata writer failed: its thread exited with code ${code}`),
      ),
    );
  }

  private send(message: Record<string, unknown>): Promise<Reply> {
    if (this.ended) return Promise.reject(this.ended());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id });
    });
  }

  /**
   * Takes the store over. While another process holds its write lock — a manager paused in the middle of
   * a write, which keeps the lock until it resumes — this waits, trying again, for as long as it takes
   * (until close or `signal`): giving up would leave the cluster with no manager at all. `onLocked`
   * hears of each refusal.
   */
  takeOver(options: TakeOverOptions = {}): Promise<number> {
    return untilTaken(
      async () => (await this.send({ type: 'takeOver' })).epoch!,
      options,
      () => this.closing,
    );
  }

  async apply(mutations: Mutation[]): Promise<MutationResult[]> {
    return (await this.send({ type: 'apply', mutations })).results!;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.send({ type: 'close' }).catch(() => undefined);
    await this.worker.terminate();
  }
}

/**
 * Applies batches through an asynchronous backend (PostgreSQL): the database serializes the writers, so
 * the manager's group commit needs no thread of its own. The backend is closed by its owner.
 *
 * One batch at a time, in the order given, as the other writers do: two transactions in flight could
 * commit in either order, and the commit queue's listeners (the collector's reference index among them)
 * must see batches in the order they committed. The database's writer lock serialized them anyway.
 */
export class BackendWriter implements BatchWriter {
  private closing = false;
  private last: Promise<unknown> = Promise.resolve();

  constructor(private readonly backend: MetaBackend) {}

  takeOver(options: TakeOverOptions = {}): Promise<number> {
    return untilTaken(
      () => this.backend.takeOver(),
      options,
      () => this.closing,
    );
  }

  apply(mutations: Mutation[]): Promise<MutationResult[]> {
    const next = this.last.then(() => this.backend.applyBatch(mutations, { validated: true }));
    this.last = next.catch(() => undefined);
    return next;
  }

  async close(): Promise<void> {
    this.closing = true;
  }
}

/**
 * Takes a store over. While the store cannot be reached or another process holds its lock — a manager
 * paused in the middle of a write keeps SQLite's lock until it resumes, PostgreSQL's until the server ends
 * its idle transaction — this waits, trying again, for as long as it takes (until closed or `signal`):
 * giving up would leave the cluster with no manager at all. A takeover whose outcome is unknown (its
 * COMMIT's answer lost) is run again too: the epoch it may have written was never used, and a second
 * takeover only fences once more.
 */
async function untilTaken(
  take: () => Promise<number>,
  options: TakeOverOptions,
  closing: () => boolean,
): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await take();
    } catch (err) {
      const again = err instanceof ExcError && (err.code === 'UNAVAILABLE' || err.code === 'OUTCOME_UNKNOWN');
      if (!again || closing()) throw err;
      options.onLocked?.(err);
      await sleep(backoffDelay(attempt, { baseMs: 100, maxMs: 1_000 }), options.signal);
    }
  }
}
