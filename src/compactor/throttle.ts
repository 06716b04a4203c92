/**
 * A read-throughput limit for compactions (like Accumulo's compaction throughput setting): keeps a
 * compactor from saturating a shared object store or network. A token bucket refilled at `bytesPerSecond`
 * (with one second of burst) is charged for every byte read; a read waits until its bytes are available.
 */
import { sleep } from '../retry.js';
import type { AppendableOptions, ObjectStore, ReadOptions, StreamOptions } from '../storage/index.js';

class TokenBucket {
  private tokens: number;
  private last = Date.now();

  constructor(private readonly rate: number) {
    this.tokens = rate;
  }

  async take(n: number, signal?: AbortSignal): Promise<void> {
    for (;;) {
      const now = Date.now();
      this.tokens = Math.min(this.rate, this.tokens + ((now - this.last) / 1000) * this.rate);
      this.last = now;
      if (this.tokens >= Math.min(n, this.rate)) {
        this.tokens -= n; // may go negative for a read larger than the burst: later reads wait it off
        return;
      }
      await sleep(Math.ceil(((Math.min(n, this.rate) - this.tokens) / this.rate) * 1000), signal);
    }
  }
}

/** `store` with reads limited to `bytesPerSecond`. Writes, listing and deletes are not limited. */
export function throttleReads(store: ObjectStore, bytesPerSecond: number): ObjectStore {
  const bucket = new TokenBucket(bytesPerSecond);
  return {
    get url() {
      return store.url;
    },
    write: (name, body, options) => store.write(name, body, options),
    // Appending writes is not reading: not limited (a checkpointed output is written in place locally).
    ...(store.openAppendable
      ? {
          openAppendable: (
            name: string,
            from?: { name: string; size: number },
            options?: AppendableOptions,
          ) => store.openAppendable!(name, from, options),
        }
      : {}),
    async readRange(name: string, offset: number, length: number, options?: ReadOptions) {
      const data = await store.readRange(name, offset, length, options);
      await bucket.take(data.length, options?.signal);
      return data;
    },
    async *readStream(name: string, options?: StreamOptions) {
      for await (const chunk of store.readStream(name, options)) {
        await bucket.take(chunk.length, options?.signal);
        yield chunk;
      }
    },
    stat: (name) => store.stat(name),
    list: (prefix) => store.list(prefix),
    delete: (name) => store.delete(name),
    close: () => store.close(),
  };
}
