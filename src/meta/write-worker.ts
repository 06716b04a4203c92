/**
 * The metadata store's writer thread: owns the connection that applies batches of conditional mutations
 * (and takes the store over for a new manager epoch). Applying a batch ends with an fsync; doing it here
 * keeps the manager's event loop serving requests meanwhile, so the next batch fills up while this one
 * is made durable (pipelined group commit).
 *
 * Protocol (messages from the parent):
 *   { id, type: 'takeOver' }                → { id, epoch }
 *   { id, type: 'apply', mutations }        → { id, results } | { id, error: { code, message } }
 *   { id, type: 'close' }                   → { id, closed: true }
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ExcError } from '../errors.js';
import { MetaStore, lockRefusal } from './store.js';
import type { Mutation } from './types.js';

type Message =
  | { id: number; type: 'takeOver' }
  | { id: number; type: 'apply'; mutations: Mutation[] }
  | { id: number; type: 'close' };

const port = parentPort;
if (!port) throw new Error('write-worker.js runs as a worker thread');
const options = workerData as { path: string; busyTimeoutMs?: number };
// Opened on first use, and again after a failure: opening can meet another process's lock too.
let opened: MetaStore | undefined;
const store = (): MetaStore => (opened ??= new MetaStore(options));

port.on('message', (msg: Message) => {
  try {
    switch (msg.type) {
      case 'takeOver':
        port.postMessage({ id: msg.id, epoch: store().takeOver() });
        break;
      case 'apply':
        port.postMessage({ id: msg.id, results: store().applyBatch(msg.mutations, { validated: true }) });
        break;
      case 'close':
        opened?.close();
        port.postMessage({ id: msg.id, closed: true });
        break;
    }
  } catch (err) {
    const e =
      err instanceof ExcError ? err : (lockRefusal(err) ?? new ExcError('INTERNAL', (err as Error).message));
    port.postMessage({ id: msg.id, error: { code: e.code, message: e.message } });
  }
});
