/**
 * The object-store contract: one suite that every ObjectStore implementation must pass (local
 * directory, S3, memory). `open` gives a fresh, empty store for each test.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import {
  LocalObjectStore,
  S3ObjectStore,
  type ObjectStore,
  type TemporaryInfo,
} from '../../src/storage/index.js';
import { waitFor } from '../support/waits.js';

export interface ContractOptions {
  /** Size of the "large streaming write" test; it should span several multipart parts on S3. */
  largeBytes?: number;
  /** Bytes a write sends before it pauses in the temporaries test: on S3, more than a part. */
  pausedWriteBytes?: number;
  /**
   * 'refused' when the backend cannot list temporaries (s3rver has no ListMultipartUploads): the store
   * must then say NOT_SUPPORTED, never answer "none". Default 'listed'.
   */
  temporaries?: 'listed' | 'refused';
}

export async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

export async function names(store: ObjectStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const info of store.list(prefix)) out.push(info.name);
  return out.sort();
}

export async function temporaries(store: ObjectStore, prefix: string): Promise<TemporaryInfo[]> {
  if (!store.listTemporaries) throw new Error(`${store.url} cannot list temporaries`);
  const out: TemporaryInfo[] = [];
  for await (const t of store.listTemporaries(prefix)) out.push(t);
  return out;
}

async function* chunksOf(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

/** Names that must never reach the file system or S3, each for a different reason. */
export const BAD_NAMES = [
  '',
  '..',
  '.',
  '../x',
  'a/../../b',
  'a/./b',
  'x/..',
  '/abs',
  '/etc/passwd',
  'a//b',
  'a/',
  '.hidden',
  'a/.tmp',
  '%2e%2e',
  '%2e%2e/%2e%2e/etc/passwd',
  'a%2Fb',
  'a\\b',
  '..\\..\\x',
  'a\0b',
  'a\nb',
  'tab\there',
  'sp ace',
  'é',
  '\u2024\u2024',
  'x'.repeat(1025),
];

/**
 * Puts `key` (relative to the store's root or prefix) straight into the directory or bucket, bypassing
 * the store's name check, as another tool would. False for a store with nothing underneath (memory).
 */
async function putStray(store: ObjectStore, key: string): Promise<boolean> {
  if (store instanceof LocalObjectStore) {
    const path = join(store.root, ...key.split('/'));
    if (key.endsWith('/')) mkdirSync(path, { recursive: true });
    else {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, 'stray');
    }
    return true;
  }
  if (store instanceof S3ObjectStore) {
    const prefix = store.url.slice(`s3://${store.bucket}/`.length);
    const Key = prefix === '' ? key : `${prefix}/${key}`;
    await store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key, Body: 'stray' }));
    return true;
  }
  return false;
}

async function expectCode(promise: Promise<unknown>, code: string, mentions?: string): Promise<ExcError> {
  const err = await promise.then(
    () => {
      throw new Error(`expected ${code}, but it succeeded`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExcError);
  expect((err as ExcError).code).toBe(code);
  if (mentions !== undefined) expect((err as ExcError).message).toContain(mentions);
  return err as ExcError;
}

export function objectStoreContract(
  label: string,
  open: () => Promise<ObjectStore>,
  options: ContractOptions = {},
): void {
  describe(`object store contract - ${label}`, () => {
    let store: ObjectStore;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(async () => {
      await store.close();
    });

    it('write and read back - whole, ranges, streams with offsets', async () => {
      const data = randomBytes(100_000);
      expect(await store.write('dir/obj.bin', data)).toEqual({ size: data.length });
      expect((await store.readRange('dir/obj.bin', 0, data.length)).equals(data)).toBe(true);
      expect((await store.readRange('dir/obj.bin', 1234, 5000)).equals(data.subarray(1234, 6234))).toBe(true);
      // A range that crosses the end is cut at the end; one that starts past it is empty.
      expect((await store.readRange('dir/obj.bin', 99_990, 100)).equals(data.subarray(99_990))).toBe(true);
      expect((await store.readRange('dir/obj.bin', 100_000, 10)).length).toBe(0);
      expect((await store.readRange('dir/obj.bin', 200_000, 10)).length).toBe(0);
      expect((await store.readRange('dir/obj.bin', 10, 0)).length).toBe(0);
      expect((await collect(store.readStream('dir/obj.bin'))).equals(data)).toBe(true);
      expect(
        (await collect(store.readStream('dir/obj.bin', { offset: 777 }))).equals(data.subarray(777)),
      ).toBe(true);
      expect(
        (await collect(store.readStream('dir/obj.bin', { offset: 50_000, length: 20_000 }))).equals(
          data.subarray(50_000, 70_000),
        ),
      ).toBe(true);
      expect(
        (await collect(store.readStream('dir/obj.bin', { offset: 99_000, length: 5_000 }))).equals(
          data.subarray(99_000),
        ),
      ).toBe(true);
      expect((await collect(store.readStream('dir/obj.bin', { offset: 5, length: 0 }))).length).toBe(0);
      expect((await collect(store.readStream('dir/obj.bin', { offset: 100_000 }))).length).toBe(0);
    });

    it('write - a stream of chunks is stored as their concatenation', async () => {
      const parts = [randomBytes(10), Buffer.alloc(0), randomBytes(70_000), randomBytes(1)];
      async function* body(): AsyncGenerator<Buffer> {
        for (const p of parts) yield p;
      }
      expect(await store.write('s', body())).toEqual({ size: 70_011 });
      expect((await collect(store.readStream('s'))).equals(Buffer.concat(parts))).toBe(true);
    });

    it("write - a chunk is the store's only until it asks for the next: the producer may then fill it again", async () => {
      // One buffer for every chunk, scribbled over as soon as the store asks for the next one (what the
      // RFile writer does with its compression buffers); chunks of every size around a store's batches.
      const data = randomBytes(options.largeBytes ?? 3 * 1024 * 1024 + 777);
      const sizes = [1, 4096, 65_536 + 3, 1 << 20, (1 << 20) + 1, 300_000, 12];
      const scratch = Buffer.alloc((1 << 20) + 1);
      async function* reused(): AsyncGenerator<Buffer> {
        for (let pos = 0, i = 0; pos < data.length; i++) {
          const n = Math.min(sizes[i % sizes.length]!, data.length - pos);
          data.copy(scratch, 0, pos, pos + n);
          yield scratch.subarray(0, n);
          scratch.fill(0xee);
          pos += n;
        }
      }
      expect(await store.write('reused/chunks', reused())).toEqual({ size: data.length });
      expect((await store.readRange('reused/chunks', 0, data.length)).equals(data)).toBe(true);
    });

    it('readStream - with `alloc`, the same bytes, in its memory', async () => {
      const data = randomBytes(options.largeBytes ?? 3 * 1024 * 1024 + 777);
      await store.write('alloc/obj', data);
      const given = new Set<ArrayBufferLike>();
      const alloc = (size: number): Buffer => {
        const b = Buffer.alloc(size);
        given.add(b.buffer);
        return b;
      };
      const chunks: Buffer[] = [];
      for await (const chunk of store.readStream('alloc/obj', { offset: 5, alloc })) chunks.push(chunk);
      expect(Buffer.concat(chunks).equals(data.subarray(5))).toBe(true);
      expect(chunks.every((c) => c.byteOffset === 0 && given.has(c.buffer))).toBe(true);
    });

    it('readStream - with `alloc`, a chunk keeps its bytes while later ones are read into memory given back', async () => {
      const data = randomBytes(options.largeBytes ?? 3 * 1024 * 1024 + 777);
      await store.write('alloc/reused', data);
      const free: ArrayBuffer[] = [];
      let made = 0;
      const alloc = (size: number): Buffer => {
        const memory = free.find((m) => m.byteLength >= size);
        if (memory !== undefined) {
          free.splice(free.indexOf(memory), 1);
          return Buffer.from(memory, 0, size);
        }
        made++;
        return Buffer.from(new ArrayBuffer(size));
      };
      // The last three chunks are held as they are; an older one is checked (a store that wrote into
      // memory it had handed out shows here), then its memory is given back for the next reads.
      const held: { chunk: Buffer; at: number }[] = [];
      const check = ({ chunk, at }: { chunk: Buffer; at: number }): void => {
        expect(chunk.equals(data.subarray(at, at + chunk.length)), `the chunk at ${at}`).toBe(true);
      };
      let at = 0;
      let chunks = 0;
      for await (const chunk of store.readStream('alloc/reused', { alloc })) {
        held.push({ chunk, at });
        at += chunk.length;
        chunks++;
        while (held.length > 3) {
          const old = held.shift()!;
          check(old);
          if (old.chunk.byteOffset === 0 && old.chunk.buffer instanceof ArrayBuffer)
            free.push(old.chunk.buffer);
        }
      }
      held.forEach(check);
      expect(at).toBe(data.length);
      // The memory did go round: a few buffers for the whole object.
      expect(made).toBeLessThan(chunks / 2);
    });

    it('write - an empty object', async () => {
      await store.write('empty', Buffer.alloc(0));
      expect((await store.stat('empty'))?.size).toBe(0);
      expect((await collect(store.readStream('empty'))).length).toBe(0);
    });

    it('stat - size and modification time of an object, null for a missing one', async () => {
      const before = Date.now();
      await store.write('a/b', Buffer.from('hello'));
      const info = await store.stat('a/b');
      expect(info).toMatchObject({ name: 'a/b', size: 5 });
      // S3 keeps whole seconds.
      expect(info!.modifiedMs).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      expect(await store.stat('a/c')).toBeNull();
      expect(await store.stat('a')).toBeNull();
    });

    it('overwrite - a second write replaces the object as a whole', async () => {
      await store.write('o', randomBytes(50_000));
      const second = Buffer.from('short');
      await store.write('o', second);
      expect((await collect(store.readStream('o'))).equals(second)).toBe(true);
      expect((await store.stat('o'))?.size).toBe(5);
    });

    it('missing object - reads fail with OBJECT_NOT_FOUND naming it; delete is idempotent', async () => {
      await expectCode(store.readRange('no/such', 0, 10), 'OBJECT_NOT_FOUND', 'no/such');
      await expectCode(collect(store.readStream('no/such')), 'OBJECT_NOT_FOUND', 'no/such');
      await store.delete('no/such');
      await store.write('gone', Buffer.from('x'));
      await store.delete('gone');
      await store.delete('gone');
      expect(await store.stat('gone')).toBeNull();
      await expectCode(store.readRange('gone', 0, 1), 'OBJECT_NOT_FOUND', 'gone');
    });

    it('list - names relative to the root, filtered by prefix, nested', async () => {
      for (const name of ['t/1/a.rf', 't/1/b.rf', 't/10/c.rf', 't/2/d.rf', 'u/e.rf', 'top']) {
        await store.write(name, Buffer.from(name));
      }
      expect(await names(store, '')).toEqual([
        't/1/a.rf',
        't/1/b.rf',
        't/10/c.rf',
        't/2/d.rf',
        'top',
        'u/e.rf',
      ]);
      expect(await names(store, 't/1/')).toEqual(['t/1/a.rf', 't/1/b.rf']);
      expect(await names(store, 't/1')).toEqual(['t/1/a.rf', 't/1/b.rf', 't/10/c.rf']);
      expect(await names(store, 't/1/a')).toEqual(['t/1/a.rf']);
      expect(await names(store, 'x')).toEqual([]);
      const sizes = new Map<string, number>();
      for await (const info of store.list('u/')) sizes.set(info.name, info.size);
      expect(sizes).toEqual(new Map([['u/e.rf', 6]]));
      await store.delete('t/1/a.rf');
      expect(await names(store, 't/1/')).toEqual(['t/1/b.rf']);
    });

    it('list - keys put there by other tools under names no operation accepts are skipped', async (ctx) => {
      // A console's folder marker, a space, a non-ASCII letter, a temporary file: listed, each would fail
      // a delete with INVALID_NAME, and the garbage collector deletes what it lists.
      for (const key of ['t/1/', 't/1/sp ace.rf', 't/1/é.rf', 't/2/.half.tmp']) {
        if (!(await putStray(store, key))) ctx.skip();
      }
      await store.write('t/1/a.rf', Buffer.from('a'));
      expect(await names(store, '')).toEqual(['t/1/a.rf']);
      expect(await names(store, 't/1/')).toEqual(['t/1/a.rf']);
      for await (const info of store.list('t/')) await store.delete(info.name);
      expect(await store.stat('t/1/a.rf')).toBeNull();
    });

    it('names - anything that could escape the root is refused with INVALID_NAME, for every operation', async () => {
      await store.write('inside', Buffer.from('x'));
      for (const bad of BAD_NAMES) {
        const shown = JSON.stringify(bad.length > 200 ? `${bad.slice(0, 200)}…` : bad);
        await expectCode(store.write(bad, Buffer.from('x')), 'INVALID_NAME', shown);
        await expectCode(store.readRange(bad, 0, 1), 'INVALID_NAME', shown);
        await expectCode(collect(store.readStream(bad)), 'INVALID_NAME', shown);
        await expectCode(store.stat(bad), 'INVALID_NAME', shown);
        await expectCode(store.delete(bad), 'INVALID_NAME', shown);
      }
      for (const bad of ['..', '/abs', 'a//', '../', '%2e%2e/', 'a\\']) {
        await expectCode(names(store, bad), 'INVALID_NAME');
      }
      expect(await names(store, '')).toEqual(['inside']);
    });

    it('failed write - a body that throws midway leaves no object, and the previous one intact', async () => {
      const old = Buffer.from('the previous version');
      await store.write('f', old);
      const boom = new Error('source failed');
      async function* body(): AsyncGenerator<Buffer> {
        yield randomBytes(100_000);
        yield randomBytes(100_000);
        throw boom;
      }
      await expect(store.write('f', body())).rejects.toBe(boom);
      await expect(store.write('fresh', body())).rejects.toBe(boom);
      expect(await store.stat('fresh')).toBeNull();
      expect((await collect(store.readStream('f'))).equals(old)).toBe(true);
      expect(await names(store, '')).toEqual(['f']);
    });

    it('aborted write - an abort midway leaves no object', async () => {
      const controller = new AbortController();
      async function* body(): AsyncGenerator<Buffer> {
        yield randomBytes(64 * 1024);
        controller.abort(new Error('stop'));
        yield randomBytes(64 * 1024);
        yield randomBytes(64 * 1024);
      }
      await expect(store.write('aborted', body(), { signal: controller.signal })).rejects.toThrow('stop');
      expect(await store.stat('aborted')).toBeNull();
      expect(await names(store, '')).toEqual([]);
    });

    it('temporaries - a write in progress is listed under its target until it ends; none is left after', async () => {
      if (options.temporaries === 'refused') {
        // Not "none": a check that trusted an empty answer would report a clean store it never saw.
        await expectCode(temporaries(store, 'tmp/'), 'NOT_SUPPORTED', 'ListMultipartUploads');
        return;
      }
      let release!: () => void;
      const paused = new Promise<void>((r) => (release = r));
      const pausedBytes = options.pausedWriteBytes ?? 64 * 1024;
      async function* body(): AsyncGenerator<Buffer> {
        yield* chunksOf(randomBytes(pausedBytes), 64 * 1024);
        await paused;
        yield randomBytes(1000);
      }
      const before = Date.now();
      const writing = store.write('tmp/a/obj.rf', body());
      const [seen] = await waitFor(async () => {
        const found = await temporaries(store, 'tmp/');
        return found.length > 0 && found;
      }, 'the paused write to show as a temporary');
      expect(seen).toMatchObject({ target: 'tmp/a/obj.rf' });
      expect(seen!.id).not.toBe('');
      // S3 keeps whole seconds; a file system may round too.
      expect(seen!.modifiedMs).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      expect((await temporaries(store, 'tmp/a/o')).map((t) => t.target)).toEqual(['tmp/a/obj.rf']);
      expect(await temporaries(store, 'tmp/b/')).toEqual([]);
      expect(await names(store, 'tmp/')).toEqual([]);
      release();
      expect((await writing).size).toBe(pausedBytes + 1000);
      expect(await temporaries(store, 'tmp/')).toEqual([]);
      expect(await names(store, 'tmp/')).toEqual(['tmp/a/obj.rf']);

      async function* failing(): AsyncGenerator<Buffer> {
        yield* chunksOf(randomBytes(pausedBytes), 64 * 1024);
        throw new Error('source failed');
      }
      await expect(store.write('tmp/a/failed.rf', failing())).rejects.toThrow('source failed');
      expect(await temporaries(store, '')).toEqual([]);
    });

    it('large streaming write - arrives whole, and streams back whole', async () => {
      const size = options.largeBytes ?? 3 * 1024 * 1024 + 12_345;
      const data = randomBytes(size);
      expect(await store.write('big/object', chunksOf(data, 64 * 1024 + 7))).toEqual({ size });
      expect((await store.stat('big/object'))?.size).toBe(size);
      const digest = createHash('sha256');
      for await (const chunk of store.readStream('big/object')) digest.update(chunk);
      expect(digest.digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
      const middle = await store.readRange('big/object', size - 100_000, 50_000);
      expect(middle.equals(data.subarray(size - 100_000, size - 50_000))).toBe(true);
    });
  });
}
