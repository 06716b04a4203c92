/**
 * Bytes from a stream, taken out in pieces of any size. A piece that lies within one chunk is a view
 * of it (no copy): with 256 KiB reads and 64 KiB blocks that is nearly every block.
 *
 * With `reuse`, the queue lends its memory: a piece that spans chunks is gathered into a buffer used
 * again for the next such piece, and chunks it has given out entirely are listed in `dropped` for the
 * caller to use again. Both only for a caller done with a piece before it takes the next.
 */
export class ByteQueue {
  private chunks: Buffer[] = [];
  /** Bytes of chunks[0] already taken. */
  private head = 0;
  length = 0;
  /** With `reuse`: chunks all of whose bytes were taken, the last piece taken perhaps still a view of one. */
  readonly dropped: Buffer[] = [];
  private gathered: Buffer | null = null;

  constructor(private readonly reuse = false) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** The next `n` bytes without taking them; the caller checks `length >= n` first. */
  peek(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.length - this.head >= n) return first.subarray(this.head, this.head + n);
    return this.gather(n, false);
  }

  /** Takes the next `n` bytes; the caller checks `length >= n` first. */
  take(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.head += n;
      this.length -= n;
      if (this.head === first.length) {
        this.drop(this.chunks.shift()!);
        this.head = 0;
      }
      return out;
    }
    return this.gather(n, true);
  }

  private drop(chunk: Buffer): void {
    if (this.reuse) this.dropped.push(chunk);
  }

  private gather(n: number, consume: boolean): Buffer {
    const out = consume && this.reuse ? this.gatherBuffer(n) : Buffer.allocUnsafe(n);
    let filled = 0;
    let i = 0;
    let head = this.head;
    while (filled < n) {
      const chunk = this.chunks[i]!;
      const take = Math.min(n - filled, chunk.length - head);
      chunk.copy(out, filled, head, head + take);
      filled += take;
      head += take;
      if (head === chunk.length) {
        i++;
        head = 0;
      }
    }
    if (consume) {
      for (const chunk of this.chunks.splice(0, i)) this.drop(chunk);
      this.head = head;
      this.length -= n;
    }
    return out;
  }

  /** The buffer pieces spanning chunks are gathered into, with `reuse`: grown as needed, kept if ordinary. */
  private gatherBuffer(n: number): Buffer {
    if (this.gathered !== null && this.gathered.length >= n) return this.gathered.subarray(0, n);
    const buffer = Buffer.allocUnsafe(n);
    if (n <= KEPT_GATHER_BYTES) this.gathered = buffer;
    return buffer;
  }
}

/** A gather buffer up to this size is kept for the next piece (a huge block's is not kept for good). */
const KEPT_GATHER_BYTES = 1 << 20;
