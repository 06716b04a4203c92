/**
 * Bytes from a stream, taken out in pieces of any size. A piece that lies within one chunk is a view
 * of it (no copy): with 256 KiB reads and 64 KiB blocks that is nearly every block.
 */
export class ByteQueue {
  private chunks: Buffer[] = [];
  /** Bytes of chunks[0] already taken. */
  private head = 0;
  length = 0;

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
        this.chunks.shift();
        this.head = 0;
      }
      return out;
    }
    return this.gather(n, true);
  }

  private gather(n: number, consume: boolean): Buffer {
    const out = Buffer.allocUnsafe(n);
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
      this.chunks.splice(0, i);
      this.head = head;
      this.length -= n;
    }
    return out;
  }
}
