/**
 * Object stores: where tablet files live. One small interface, two implementations — a local directory
 * (`file:///path`, the embedded default) and S3 (`s3://bucket/prefix`) — and one contract test suite
 * for both (test/storage/object-store.contract.ts).
 *
 * Names are relative, '/'-separated and validated by {@link checkName} (names.ts): nothing a caller
 * passes can reach outside the configured root or prefix.
 *
 * This module is the interface alone; opening a store by its URL is open-store.ts, which imports the
 * implementations (they import this module's types: the factory here made a cycle).
 */

export interface ObjectInfo {
  /** Relative to the store's root. */
  name: string;
  size: number;
  modifiedMs: number;
}

/**
 * What an unfinished write left in the store: a local temporary file, an incomplete S3 multipart upload.
 * A write in progress has one too; one that stays long after its write began is a leftover.
 */
export interface TemporaryInfo {
  /** The object the write would have created. */
  target: string;
  /** The leftover itself: the temporary file's path relative to the root, or the S3 upload id. */
  id: string;
  /** When the write began (S3: the upload's initiation) or last wrote (local: the file's mtime). */
  modifiedMs: number;
  /** Bytes written so far, when the store knows it without more requests. */
  size?: number;
}

/** How a sweep of temporaries (see LocalObjectStore.sweepTemporaries) is kept from deleting too much. */
export interface TemporarySweepOptions {
  /** Spares the temporaries of the targets it accepts. */
  keep?: (target: string) => boolean;
  /** Stops the sweep (rejecting with its reason) at the next temporary. */
  signal?: AbortSignal;
  /** Awaited right before each delete; a rejection stops the sweep with nothing more deleted. */
  beforeDelete?: () => Promise<void>;
}

/** How an appendable object that starts as a copy tells how far the copy is (see `openAppendable`). */
export interface AppendableOptions {
  /** Bytes of `from` copied so far: about every second while the copy runs, and once when it is done. */
  onCopied?: (bytes: number) => void;
}

/** An object written in place and made durable piece by piece (see {@link ObjectStore.openAppendable}). */
export interface AppendableWrite {
  /** Appends bytes; durable only once flushed. */
  append(chunks: Buffer[]): Promise<void>;
  /**
   * Makes everything appended before the call durable; resolves that length. Appends may go on while it
   * runs (they are durable only after a later flush).
   */
  flush(): Promise<number>;
  /** Flushes and closes it, then renames it to `target` (atomically, replacing it); resolves its size. */
  finish(target: string): Promise<number>;
  /** Closes it unfinished: the object stays as far as it was flushed, for the collector. */
  close(): Promise<void>;
}

export interface WriteOptions {
  signal?: AbortSignal;
}

export interface ReadOptions {
  signal?: AbortSignal;
}

export interface StreamOptions {
  /** Default 0. */
  offset?: number;
  /** Default: to the end of the object. */
  length?: number;
  signal?: AbortSignal;
  /**
   * Where the store reads each chunk into, instead of a new allocation: a pool the caller refills with
   * chunks it is done with (the RFile reader's, so that a scan allocates nothing per chunk). Called with
   * the most the chunk may hold; the chunk is that buffer or a view of its start (the end of an
   * object may fill less), and the store never writes into it again. (S3 copies a body sent in the
   * chunked transfer coding, which S3 servers do not use for objects, into memory of its own.)
   */
  alloc?: (size: number) => Buffer;
}

export interface ObjectStore {
  /** `file:///abs/path` or `s3://bucket/prefix`. */
  readonly url: string;
  /**
   * Writes an object. Atomic: the object appears under `name` only once complete (temporary name +
   * fsync + rename locally; a single PUT or a completed multipart upload on S3), replacing any object of
   * that name. When `body` throws or `signal` aborts, nothing appears under `name` and the error is
   * rethrown.
   *
   * A chunk of an iterable `body` is the store's to read only until it asks for the next one: the
   * producer may then fill that memory again (the RFile writer compresses every block into the same few
   * buffers). A store that keeps bytes longer copies them (the contract suite checks this).
   */
  write(
    name: string,
    body: Buffer | AsyncIterable<Buffer>,
    options?: WriteOptions,
  ): Promise<{ size: number }>;
  /**
   * Bytes [offset, offset + length) of an object; fewer when the object ends sooner (none at all when
   * `offset` is at or past its end). OBJECT_NOT_FOUND when it does not exist.
   */
  readRange(name: string, offset: number, length: number, options?: ReadOptions): Promise<Buffer>;
  /**
   * Streaming read of the whole object or of a range, in chunks of the store's choosing.
   * OBJECT_NOT_FOUND (on the first read) when it does not exist.
   */
  readStream(name: string, options?: StreamOptions): AsyncIterable<Buffer>;
  /** Size and modification time, or null when there is no such object. */
  stat(name: string): Promise<ObjectInfo | null>;
  /**
   * Objects whose name starts with `prefix` (see checkPrefix), in any order. Only valid names (see
   * isValidName): a file or key that no other operation would accept is skipped, so every name listed
   * can be read and deleted.
   */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /**
   * The temporaries of writes in progress or never finished whose target starts with `prefix`, in any
   * order. Optional: a store that cannot see them does not have it. NOT_SUPPORTED when the backend
   * refuses to list them (s3rver has no ListMultipartUploads): the caller says "not checkable" rather
   * than "none".
   */
  listTemporaries?(prefix: string): AsyncIterable<TemporaryInfo>;
  /**
   * Optional: an object written in place and made durable at each `flush` — how the local store writes a
   * checkpointed compaction's output (storage/parts.ts) without writing anything twice. With `from`, the
   * object starts as a copy of that object's first `from.size` bytes (OBJECT_NOT_FOUND when it has fewer).
   * A store without it writes checkpointed outputs as separate parts.
   */
  openAppendable?(
    name: string,
    from?: { name: string; size: number },
    options?: AppendableOptions,
  ): Promise<AppendableWrite>;
  /** Idempotent: deleting a missing object is fine. */
  delete(name: string): Promise<void>;
  close(): Promise<void>;
}
