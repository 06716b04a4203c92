/**
 * Memory used again and again for blocks and chunks that live a moment each: the blocks zstd
 * decompresses into (native-merge.ts), the chunks a scan reads its file in (reader.ts), the buffers the
 * writer compresses blocks into (writer.ts). A fresh buffer for each is memory outside V8's heap, which
 * only a full collection frees, and V8 starts one for about every 64 MB of it: a compaction of 265 MB
 * of data made seven, most of the CPU of its helper threads.
 *
 * Buffers are handed out as views of `capacity`-byte memory; only memory the pool made goes back into
 * it (a view of anything else given back is ignored), and at most `limit` of them are kept.
 */
export class BufferPool {
  private readonly free: ArrayBuffer[] = [];
  private readonly mine = new WeakSet<ArrayBufferLike>();

  constructor(
    readonly capacity: number,
    private readonly limit: number,
  ) {}

  /** A buffer of exactly `size` bytes: pooled memory when it fits, else a buffer of its own. */
  readonly take = (size: number): Buffer => {
    if (size > this.capacity) return Buffer.allocUnsafe(size);
    let memory = this.free.pop();
    if (memory === undefined) {
      memory = new ArrayBuffer(this.capacity);
      this.mine.add(memory);
    }
    return Buffer.from(memory, 0, size);
  };

  /** Takes back the memory of a buffer `take` gave, once nothing reads or writes it any more. */
  give(buffer: Buffer | null): void {
    if (buffer === null || buffer.byteOffset !== 0 || !this.mine.has(buffer.buffer)) return;
    if (this.free.length < this.limit && !this.free.includes(buffer.buffer as ArrayBuffer)) {
      this.free.push(buffer.buffer as ArrayBuffer);
    }
  }
}

/**
 * A pool's buffers lent to a consumer and all taken back at once, when it is done with everything it
 * was handed (the RFile writer's output: when its consumer asks for the next chunk).
 */
export class Lender {
  private readonly lent: Buffer[] = [];

  constructor(private readonly pool: BufferPool) {}

  readonly lend = (size: number): Buffer => {
    const buffer = this.pool.take(size);
    this.lent.push(buffer);
    return buffer;
  };

  takeBackAll(): void {
    for (const buffer of this.lent) this.pool.give(buffer);
    this.lent.length = 0;
  }
}

/**
 * The chunks a scan that reuses its memory (RFileReader.rawBlocks with `alloc`) reads its file into: of
 * the stores' chunk size (larger chunks get memory of their own), and enough for the chunk being cut
 * into blocks, the one read ahead, and one given back but not yet taken again.
 */
export function readChunkPool(): BufferPool {
  return new BufferPool(256 * 1024, 4);
}

/** Copies `source` into `target` (at least as long) and returns `target`. */
export function copyInto(target: Buffer, source: Buffer): Buffer {
  source.copy(target);
  return target;
}
