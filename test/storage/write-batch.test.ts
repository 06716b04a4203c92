/**
 * The local store's write path (src/storage/write-batch.ts): chunks gathered into batches through one
 * reused buffer, and the file flushed to disk behind the writes. The store itself is checked against
 * the contract suite (object-store.contract.ts); these are the pieces' own rules.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SyncBehind, WriteBatch } from '../../src/storage/write-batch.js';

describe('WriteBatch', () => {
  it('writes the chunks in order, in batches of at most its size, copying them as they come', async () => {
    const writes: Buffer[] = [];
    const batch = new WriteBatch(100_000, async (bytes) => void writes.push(Buffer.from(bytes)));
    const chunks = [1, 70_000, 29_999, 1, 5, 250_000, 99_999, 100_001, 3].map((n) => randomBytes(n));
    const scratch = Buffer.alloc(300_000);
    for (const chunk of chunks) {
      // The producer reuses its memory once the batch has taken the chunk.
      chunk.copy(scratch);
      await batch.add(scratch.subarray(0, chunk.length));
      scratch.fill(0xaa);
    }
    await batch.flush();
    expect(Buffer.concat(writes).equals(Buffer.concat(chunks))).toBe(true);
    expect(batch.written).toBe(chunks.reduce((n, c) => n + c.length, 0));
    // Gathered writes stay within the size; a chunk of the size or more goes as it is.
    for (const w of writes) expect(w.length <= 100_000 || chunks.some((c) => c.equals(w))).toBe(true);
    expect(writes.length).toBeLessThan(chunks.length);
  });

  it('a small file costs a small buffer: nothing written until flush, one write then', async () => {
    const writes: Buffer[] = [];
    const batch = new WriteBatch(1 << 20, async (bytes) => void writes.push(Buffer.from(bytes)));
    await batch.add(Buffer.from('hello '));
    await batch.add(Buffer.from('world'));
    expect(writes).toEqual([]);
    await batch.flush();
    expect(writes.map(String)).toEqual(['hello world']);
  });
});

describe('SyncBehind', () => {
  it('syncs every so many bytes written, one sync at a time', async () => {
    let running = 0;
    let calls = 0;
    let release = (): void => undefined;
    const behind = new SyncBehind(async () => {
      calls++;
      running++;
      expect(running).toBe(1);
      await new Promise<void>((r) => (release = r));
      running--;
    }, 1000);
    behind.wrote(999);
    expect(calls).toBe(0);
    behind.wrote(1);
    expect(calls).toBe(1);
    // While one runs, more writes start none.
    behind.wrote(5000);
    expect(calls).toBe(1);
    release();
    await behind.settle();
    behind.wrote(1000);
    expect(calls).toBe(2);
    release();
    await behind.settle();
  });

  it('a failed sync fails the write: settle throws it, even after later ones succeed', async () => {
    let fail = true;
    const behind = new SyncBehind(async () => {
      if (fail) throw new Error('EIO: i/o error, fdatasync');
    }, 10);
    behind.wrote(10);
    await expect(behind.settle()).rejects.toThrow('EIO');
    // The write goes no further: the next bytes written throw it, and settle still does.
    fail = false;
    expect(() => behind.wrote(10)).toThrow('EIO');
    await expect(behind.settle()).rejects.toThrow('EIO');
  });
});
