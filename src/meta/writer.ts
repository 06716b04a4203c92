/**
 * Who applies batches of validated mutations to the metadata store: the manager's group commit hands
 * them to a {@link BatchWriter}. {@link WorkerWriter} (what the manager runs) applies them on a writer
 * thread; {@link InlineWriter} applies them on the caller's thread (tools and tests).
 */
import { Worker } from 'node:worker_threads';
import { ExcError, isErrorCode } from '../errors.js';
import type { MetaStore } from './store.js';
import type { Mutation, MutationResult } from './types.js';

export interface BatchWriter {
  /** Takes the store over for a new manager epoch (fencing older holders); resolves with the epoch. */
  takeOver(): Promise<number>;
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
  private failed: Error | undefined;

  constructor(path: string) {
    this.worker = new Worker(new URL('./write-worker.js', import.meta.url), { workerData: { path } });
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
    const fail = (err: Error): void => {
      this.failed = err;
      for (const w of this.waiting.values())
        w.reject(new ExcError('INTERNAL', `metadata writer failed: ${err.message}`, { cause: err }));
      this.waiting.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => {
      if (this.waiting.size > 0) fail(new Error(`writer thread exited with code ${code}`));
    });
  }

  private send(message: Record<string, unknown>): Promise<Reply> {
    if (this.failed)
      return Promise.reject(new ExcError('INTERNAL', `metadata writer failed: ${this.failed.message}`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id });
    });
  }

  async takeOver(): Promise<number> {
    return (await this.send({ type: 'takeOver' })).epoch!;
  }

  async apply(mutations: Mutation[]): Promise<MutationResult[]> {
    return (await this.send({ type: 'apply', mutations })).results!;
  }

  async close(): Promise<void> {
    await this.send({ type: 'close' }).catch(() => undefined);
    await this.worker.terminate();
  }
}
