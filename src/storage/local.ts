/**
 * The local-directory object store (`file:///path`), the embedded default.
 *
 * A write goes to a hidden temporary file next to its target (`.<name>.<random>.tmp`), is fsynced,
 * renamed over the target and the directory fsynced: a crash leaves at worst a temporary file, never a
 * half file under a final name, and a completed write survives a power loss. `list` never shows
 * temporary files (names starting with '.' are not valid object names).
 */
import { randomBytes } from 'node:crypto';
import type { Dir } from 'node:fs';
import { mkdir, open, opendir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ExcError } from '../errors.js';
import { checkName, checkPrefix, checkRange, isValidName } from './names.js';
import { openAppendable } from './local-append.js';
import { fsCall, fsError, isMissing } from './local-errors.js';
import { SyncBehind, WriteBatch } from './write-batch.js';
import type {
  AppendableOptions,
  AppendableWrite,
  ObjectInfo,
  ObjectStore,
  ReadOptions,
  StreamOptions,
  TemporaryInfo,
  TemporarySweepOptions,
  WriteOptions,
} from './object-store.js';

/** Read size of a streaming read: large enough to amortise a thread-pool hop, small enough per reader. */
const READ_CHUNK = 256 * 1024;
/** Writes are gathered into one writev of about this size. */
const WRITE_BATCH = 1 << 20;
/** A file being written is flushed to disk behind the writes every this many bytes (SyncBehind). */
const SYNC_BEHIND = 8 << 20;

/**
 * A write's temporary file, next to its target: hidden (a name starting with '.' is never a valid object
 * name, so `list` skips it) and random, so that concurrent writes of one name never share a file.
 * TEMP_FILE matches exactly these names (capturing the target's base name), for listTemporaries.
 */
function tempName(target: string): string {
  return join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
}
const TEMP_FILE = /^\.(.+)\.[0-9a-f]{12}\.tmp$/;

export class LocalObjectStore implements ObjectStore {
  readonly url: string;
  /** Absolute path of the root directory. */
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
    this.url = pathToFileURL(this.root).href;
  }

  /** `file:///abs/path`, `file://localhost/abs/path` or `file://./relative/path`. */
  static fromUrl(url: string): LocalObjectStore {
    if (url.startsWith('file:///') || url.startsWith('file://localhost/')) {
      return new LocalObjectStore(fileURLToPath(url));
    }
    const rest = url.slice('file://'.length);
    if (rest === '') throw new ExcError('CONFIG_INVALID', `store ${url}: no path`);
    return new LocalObjectStore(resolve(rest));
  }

  /** The file of an object; `name` is validated first, so the path is always inside the root. */
  pathOf(name: string): string {
    return join(this.root, ...checkName(name).split('/'));
  }

  async write(
    name: string,
    body: Buffer | AsyncIterable<Buffer>,
    options: WriteOptions = {},
  ): Promise<{ size: number }> {
    const target = this.pathOf(name);
    const { signal } = options;
    signal?.throwIfAborted();
    const dir = dirname(target);
    await makeDirectory(dir, name);
    const temp = tempName(target);
    const fh = await fsCall(() => open(temp, 'wx', 0o644), 'write', name);
    const behind = new SyncBehind(() => fsCall(() => fh.datasync(), 'write', name), SYNC_BEHIND);
    let size = 0;
    try {
      try {
        if (Buffer.isBuffer(body)) {
          await writeAll(fh, [body], name);
          size = body.length;
        } else {
          // Chunks are copied into one batch buffer, reused for every write: a chunk is ours only until
          // we ask for the next (ObjectStore.write), and a fresh buffer per batch would cost an
          // allocation outside the heap per megabyte, which drives V8's collections.
          const batch = new WriteBatch(WRITE_BATCH, async (bytes) => {
            await writeAll(fh, [bytes], name);
            behind.wrote(bytes.length);
          });
          for await (const chunk of body) {
            signal?.throwIfAborted();
            await batch.add(chunk);
          }
          await batch.flush();
          size = batch.written;
        }
        signal?.throwIfAborted();
        await behind.settle();
        await fsCall(() => fh.sync(), 'write', name);
      } finally {
        // Never closed under a sync still running.
        await behind.settle().catch(() => undefined);
        await fh.close().catch(() => undefined);
      }
      await fsCall(() => rename(temp, target), 'write', name);
    } catch (err) {
      await rm(temp, { force: true }).catch(() => undefined);
      throw err;
    }
    await syncDirectory(dir, name);
    return { size };
  }

  openAppendable(
    name: string,
    from?: { name: string; size: number },
    options?: AppendableOptions,
  ): Promise<AppendableWrite> {
    const deps = { pathOf: (n: string) => this.pathOf(n), makeDirectory, syncDirectory };
    return openAppendable(deps, name, from, options);
  }

  async readRange(name: string, offset: number, length: number, options: ReadOptions = {}): Promise<Buffer> {
    const path = this.pathOf(name);
    checkRange(name, offset, length);
    options.signal?.throwIfAborted();
    const fh = await openForRead(path, name);
    try {
      const size = (await fsCall(() => fh.stat(), 'read', name)).size;
      const want = Math.max(0, Math.min(length, size - offset));
      const buf = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await fsCall(() => fh.read(buf, got, want - got, offset + got), 'read', name);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      // Never hand out uninitialised memory if the file shrank under us.
      return got === want ? buf : Buffer.from(buf.subarray(0, got));
    } finally {
      await fh.close().catch(() => undefined);
    }
  }

  async *readStream(name: string, options: StreamOptions = {}): AsyncGenerator<Buffer> {
    const path = this.pathOf(name);
    const offset = options.offset ?? 0;
    checkRange(name, offset, options.length);
    const { signal } = options;
    signal?.throwIfAborted();
    const fh = await openForRead(path, name);
    let next: Promise<Buffer> | null = null;
    try {
      const size = (await fsCall(() => fh.stat(), 'read', name)).size;
      const end = options.length === undefined ? size : Math.min(size, offset + options.length);
      let pos = offset;
      const alloc = options.alloc ?? ((n: number) => Buffer.allocUnsafe(n));
      next = pos < end ? readChunk(fh, pos, end, name, alloc) : null;
      while (next) {
        const chunk: Buffer = await next;
        next = null;
        if (chunk.length === 0) break; // the file shrank under us
        pos += chunk.length;
        // Read ahead one chunk while the consumer works on this one; its failure (handled at once, so
        // that it is no unhandled rejection while the consumer works) is thrown when it is awaited.
        if (pos < end) {
          next = readChunk(fh, pos, end, name, alloc);
          next.catch(() => undefined);
        }
        signal?.throwIfAborted();
        yield chunk;
      }
    } finally {
      // A read still in flight must finish before its handle is closed.
      if (next) await next.catch(() => undefined);
      await fh.close().catch(() => undefined);
    }
  }

  async stat(name: string): Promise<ObjectInfo | null> {
    return statFile(this.pathOf(name), name);
  }

  async *list(prefix: string): AsyncGenerator<ObjectInfo> {
    checkPrefix(prefix);
    const slash = prefix.lastIndexOf('/');
    yield* this.walk(slash < 0 ? '' : prefix.slice(0, slash), prefix);
  }

  private async *walk(dirName: string, prefix: string): AsyncGenerator<ObjectInfo> {
    const dirPath = dirName === '' ? this.root : join(this.root, ...dirName.split('/'));
    const dir = await openDirectory(dirPath, prefix);
    if (!dir) return;
    for await (const entry of dir) {
      // Temporary files of writes in progress, and anything else that is not a valid object name.
      if (entry.name.startsWith('.')) continue;
      const name = dirName === '' ? entry.name : `${dirName}/${entry.name}`;
      if (entry.isDirectory()) {
        if (`${name}/`.startsWith(prefix) || prefix.startsWith(`${name}/`)) yield* this.walk(name, prefix);
      } else if (entry.isFile() && name.startsWith(prefix) && isValidName(name)) {
        // The name is checked already: stat the path at hand rather than rebuild it through pathOf.
        const info = await statFile(join(dirPath, entry.name), name);
        if (info) yield info; // null: deleted since the directory was read
      }
    }
  }

  /**
   * The temporary files of writes in progress or never finished (a crashed process) whose target starts
   * with `prefix`: hidden files next to their targets, so the walk is the one `list` does.
   */
  async *listTemporaries(prefix: string): AsyncGenerator<TemporaryInfo> {
    checkPrefix(prefix);
    const slash = prefix.lastIndexOf('/');
    yield* this.walkTemporaries(slash < 0 ? '' : prefix.slice(0, slash), prefix);
  }

  private async *walkTemporaries(dirName: string, prefix: string): AsyncGenerator<TemporaryInfo> {
    const dirPath = dirName === '' ? this.root : join(this.root, ...dirName.split('/'));
    const dir = await openDirectory(dirPath, prefix);
    if (!dir) return;
    for await (const entry of dir) {
      const name = dirName === '' ? entry.name : `${dirName}/${entry.name}`;
      if (entry.isDirectory() && !entry.name.startsWith('.')) {
        if (`${name}/`.startsWith(prefix) || prefix.startsWith(`${name}/`))
          yield* this.walkTemporaries(name, prefix);
        continue;
      }
      const target = entry.isFile() ? TEMP_FILE.exec(entry.name)?.[1] : undefined;
      if (target === undefined) continue;
      const targetName = dirName === '' ? target : `${dirName}/${target}`;
      if (!targetName.startsWith(prefix)) continue;
      const info = await stat(join(dirPath, entry.name)).catch(() => null);
      // null: the write finished (renamed) or failed (removed) since the directory was read.
      if (info) yield { target: targetName, id: name, modifiedMs: info.mtimeMs, size: info.size };
    }
  }

  /**
   * Deletes the temporary files of writes that never finished (a crashed process) under `prefix`, when
   * last modified longer than `olderThanMs` ago. A write in progress keeps its file's modification time
   * recent, so it is never touched; nor is one whose target `keep` accepts (the collector's: an output a
   * reservation is writing, which may append nothing for longer than that). `signal` and `beforeDelete`
   * stop it part way (the collector's fence). Resolves with the number deleted.
   */
  async sweepTemporaries(
    prefix: string,
    olderThanMs: number,
    options: TemporarySweepOptions = {},
  ): Promise<number> {
    let deleted = 0;
    for await (const t of this.listTemporaries(prefix)) {
      options.signal?.throwIfAborted();
      if (Date.now() - t.modifiedMs < olderThanMs || options.keep?.(t.target)) continue;
      await options.beforeDelete?.();
      await unlink(join(this.root, ...t.id.split('/'))).catch(() => undefined);
      deleted++;
    }
    return deleted;
  }

  async delete(name: string): Promise<void> {
    const path = this.pathOf(name);
    try {
      await unlink(path);
    } catch (err) {
      if (isMissing(err)) return;
      throw fsError(err, 'delete', name);
    }
  }

  async close(): Promise<void> {}
}

/** The object stored at `path`, or null when there is no file there. */
async function statFile(path: string, name: string): Promise<ObjectInfo | null> {
  try {
    const s = await stat(path);
    return s.isFile() ? { name, size: s.size, modifiedMs: s.mtimeMs } : null;
  } catch (err) {
    if (isMissing(err)) return null;
    throw fsError(err, 'stat', name);
  }
}

/** The directory for listing under `prefix`, or null when it does not exist (nothing there yet). */
async function openDirectory(path: string, prefix: string): Promise<Dir | null> {
  try {
    return await opendir(path);
  } catch (err) {
    if (isMissing(err)) return null;
    throw fsError(err, 'list', prefix);
  }
}

async function readChunk(
  fh: FileHandle,
  pos: number,
  end: number,
  name: string,
  alloc: (size: number) => Buffer,
): Promise<Buffer> {
  const buf = alloc(Math.min(READ_CHUNK, end - pos));
  let got = 0;
  while (got < buf.length) {
    const { bytesRead } = await fsCall(() => fh.read(buf, got, buf.length - got, pos + got), 'read', name);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got === buf.length ? buf : Buffer.from(buf.subarray(0, got));
}

async function writeAll(fh: FileHandle, chunks: Buffer[], name: string): Promise<void> {
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const { bytesWritten } = await fsCall(() => fh.writev(chunks), 'write', name);
  if (bytesWritten === total) return;
  // A short writev is legal; finish with plain writes.
  let rest = Buffer.concat(chunks).subarray(bytesWritten);
  while (rest.length > 0) {
    const { bytesWritten: n } = await fsCall(() => fh.write(rest), 'write', name);
    rest = rest.subarray(n);
  }
}

async function openForRead(path: string, name: string): Promise<FileHandle> {
  try {
    const fh = await open(path, 'r');
    return fh;
  } catch (err) {
    if (isMissing(err) || (err as { code?: string }).code === 'EISDIR') {
      throw new ExcError('OBJECT_NOT_FOUND', `no object ${name}`, { details: { name } });
    }
    throw fsError(err, 'read', name);
  }
}

/**
 * `mkdir -p dir`, made durable. A new directory is an entry in its parent, so it survives a power loss
 * only once that parent is synced: syncing just the file's own directory after the rename (as every
 * write does) would leave `tables/7` itself, and with it a file a tablet references, to be lost. So the
 * parent of each directory created is synced, from the first created up to `dir` (the root's parent too
 * when the root itself was made). A write into an existing directory pays nothing more: mkdir answers
 * undefined when it created nothing.
 */
async function makeDirectory(dir: string, name: string): Promise<void> {
  const first = await fsCall(() => mkdir(dir, { recursive: true }), 'write', name);
  if (first === undefined) return;
  const top = dirname(first);
  for (let p = dir; p !== top;) {
    p = dirname(p);
    await syncDirectory(p, name);
  }
}

/** A rename is durable only once its directory is synced. */
async function syncDirectory(dir: string, name: string): Promise<void> {
  let dh: FileHandle | undefined;
  try {
    dh = await open(dir, 'r');
    await dh.sync();
  } catch (err) {
    // Some file systems cannot sync a directory; the data itself is synced already.
    const code = (err as { code?: string }).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EISDIR') throw fsError(err, 'write', name);
  } finally {
    await dh?.close().catch(() => undefined);
  }
}
