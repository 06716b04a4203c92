/**
 * An object store in memory: for unit and property tests and for benchmarks that want the file bytes
 * already in memory. It keeps the contract (validated names, atomic writes, copies in and out so a caller
 * can never change a stored object) and passes the same contract suite as the real stores.
 */
import { ExcError } from '../errors.js';
import { checkName, checkPrefix, checkRange } from './names.js';
import type {
  ObjectInfo,
  ObjectStore,
  ReadOptions,
  StreamOptions,
  TemporaryInfo,
  WriteOptions,
} from './object-store.js';
import { copyInto } from './rfile/buffer-pool.js';

const CHUNK = 256 * 1024;

export class MemoryObjectStore implements ObjectStore {
  readonly url: string;
  private readonly objects = new Map<string, { data: Buffer; modifiedMs: number }>();
  /** Writes in progress, as the temporaries a real store would show for them (see listTemporaries). */
  private readonly writing = new Set<TemporaryInfo>();
  private writeSeq = 0;
  /** Counters for tests: bytes handed out by reads, objects written. */
  readonly stats = { bytesRead: 0, writes: 0 };

  constructor(label = 'mem') {
    this.url = `memory://${label}`;
  }

  async write(
    name: string,
    body: Buffer | AsyncIterable<Buffer>,
    options: WriteOptions = {},
  ): Promise<{ size: number }> {
    checkName(name);
    options.signal?.throwIfAborted();
    const temporary = { target: name, id: `write-${++this.writeSeq}`, modifiedMs: Date.now(), size: 0 };
    this.writing.add(temporary);
    try {
      let data: Buffer;
      if (Buffer.isBuffer(body)) {
        data = Buffer.from(body);
      } else {
        const chunks: Buffer[] = [];
        for await (const chunk of body) {
          options.signal?.throwIfAborted();
          chunks.push(Buffer.from(chunk));
          temporary.size += chunk.length;
          temporary.modifiedMs = Date.now();
        }
        data = Buffer.concat(chunks);
      }
      options.signal?.throwIfAborted();
      this.objects.set(name, { data, modifiedMs: Date.now() });
      this.stats.writes++;
      return { size: data.length };
    } finally {
      this.writing.delete(temporary);
    }
  }

  async readRange(name: string, offset: number, length: number, options: ReadOptions = {}): Promise<Buffer> {
    checkRange(name, offset, length);
    options.signal?.throwIfAborted();
    const data = this.get(name);
    const out = Buffer.from(
      data.subarray(Math.min(offset, data.length), Math.min(offset + length, data.length)),
    );
    this.stats.bytesRead += out.length;
    return out;
  }

  async *readStream(name: string, options: StreamOptions = {}): AsyncGenerator<Buffer> {
    const offset = options.offset ?? 0;
    checkRange(name, offset, options.length);
    options.signal?.throwIfAborted();
    const data = this.get(name);
    const end = options.length === undefined ? data.length : Math.min(data.length, offset + options.length);
    for (let pos = offset; pos < end; pos += CHUNK) {
      options.signal?.throwIfAborted();
      const view = data.subarray(pos, Math.min(end, pos + CHUNK));
      // A copy: the caller may keep or change it without touching the stored object.
      const chunk = options.alloc ? copyInto(options.alloc(view.length), view) : Buffer.from(view);
      this.stats.bytesRead += chunk.length;
      yield chunk;
    }
  }

  async stat(name: string): Promise<ObjectInfo | null> {
    checkName(name);
    const obj = this.objects.get(name);
    return obj ? { name, size: obj.data.length, modifiedMs: obj.modifiedMs } : null;
  }

  async *list(prefix: string): AsyncGenerator<ObjectInfo> {
    checkPrefix(prefix);
    for (const [name, obj] of [...this.objects]) {
      if (name.startsWith(prefix)) yield { name, size: obj.data.length, modifiedMs: obj.modifiedMs };
    }
  }

  /** Writes in progress: in memory nothing outlives a write, so there are never leftovers. */
  async *listTemporaries(prefix: string): AsyncGenerator<TemporaryInfo> {
    checkPrefix(prefix);
    for (const t of [...this.writing]) if (t.target.startsWith(prefix)) yield { ...t };
  }

  async delete(name: string): Promise<void> {
    checkName(name);
    this.objects.delete(name);
  }

  async close(): Promise<void> {}

  /** The stored bytes (a copy), for tests that damage files. */
  bytes(name: string): Buffer {
    return Buffer.from(this.get(name));
  }

  /** Replaces an object's bytes without going through write (tests: corruption). */
  put(name: string, data: Buffer): void {
    this.objects.set(checkName(name), { data: Buffer.from(data), modifiedMs: Date.now() });
  }

  private get(name: string): Buffer {
    checkName(name);
    const obj = this.objects.get(name);
    if (!obj) throw new ExcError('OBJECT_NOT_FOUND', `no object ${name}`, { details: { name } });
    return obj.data;
  }
}
