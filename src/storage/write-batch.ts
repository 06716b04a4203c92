/**
 * A stream's chunks gathered into writes of about `size` bytes, through one buffer reused for every
 * write (the local store's writes, and the appends of a checkpointed output, parts.ts).
 *
 * Each chunk is copied when it is added: its producer may fill that memory again as soon as we ask for
 * the next chunk (ObjectStore.write), and holding the chunks themselves until a batch is full would need
 * a fresh buffer per chunk on the producer's side: memory outside V8's heap, whose every 64 MB or so
 * starts a full collection. A chunk of `size` or more is written as it is, after what was gathered.
 *
 * The buffer starts at 64 KiB and doubles up to `size`: most files (flushes) are a few KiB.
 */
export class WriteBatch {
  private buffer: Buffer | null = null;
  private fill = 0;
  /** Bytes written so far. */
  written = 0;

  constructor(
    private readonly size: number,
    /** Writes `bytes` (a view of the batch buffer, free again once this resolves). */
    private readonly write: (bytes: Buffer) => Promise<void>,
  ) {}

  async add(chunk: Buffer): Promise<void> {
    if (chunk.length === 0) return;
    if (chunk.length >= this.size) {
      await this.flush();
      await this.write(chunk);
      this.written += chunk.length;
      return;
    }
    if (this.fill + chunk.length > (this.buffer?.length ?? 0)) this.makeRoom(chunk.length);
    if (this.fill + chunk.length > this.buffer!.length) await this.flush();
    chunk.copy(this.buffer!, this.fill);
    this.fill += chunk.length;
  }

  /** Writes what was gathered. */
  async flush(): Promise<void> {
    if (this.fill === 0) return;
    await this.write(this.buffer!.subarray(0, this.fill));
    this.written += this.fill;
    this.fill = 0;
  }

  /** Grows the buffer (up to `size`) so that `more` bytes fit after those gathered, if it can. */
  private makeRoom(more: number): void {
    const have = this.buffer?.length ?? 0;
    if (have >= this.size) return;
    let capacity = Math.max(have, FIRST_BUFFER);
    while (capacity < this.fill + more && capacity < this.size) capacity *= 2;
    const grown = Buffer.allocUnsafe(Math.min(capacity, this.size));
    this.buffer?.copy(grown, 0, 0, this.fill);
    this.buffer = grown;
  }
}

const FIRST_BUFFER = 64 * 1024;

/**
 * A file being written flushed to disk behind the writes, every `every` bytes (RocksDB's bytes_per_sync):
 * the fsync that makes it durable at the end then has only the last stretch to write, instead of the
 * whole file at once (a compaction's output, 100 MB and more, waited on by the job with its core idle).
 * One sync at a time; a failed one fails the write (`settle`), since a later fsync may not report it again.
 */
export class SyncBehind {
  private unsynced = 0;
  private running: Promise<void> | null = null;
  private failure: { err: unknown } | undefined;

  constructor(
    private readonly sync: () => Promise<void>,
    private readonly every: number,
  ) {}

  /** Counts bytes written; throws the failure of a sync behind them, if one failed. */
  wrote(bytes: number): void {
    if (this.failure) throw this.failure.err;
    this.unsynced += bytes;
    if (this.unsynced < this.every || this.running !== null) return;
    this.unsynced = 0;
    const run: Promise<void> = this.sync()
      .catch((err: unknown) => {
        this.failure ??= { err };
      })
      .finally(() => {
        if (this.running === run) this.running = null;
      });
    this.running = run;
  }

  /** Waits for the sync under way; throws the first that failed. */
  async settle(): Promise<void> {
    await this.running;
    if (this.failure) throw this.failure.err;
  }
}
