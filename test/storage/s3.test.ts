import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type {
  ListMultipartUploadsCommandInput,
  ListMultipartUploadsCommandOutput,
  ListObjectsV2CommandInput,
  ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import {
  openObjectStore,
  type ObjectStore,
  type S3ObjectStore,
  type StoreTuning,
} from '../../src/storage/index.js';
import { uniqueName, useS3 } from '../support/index.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { collect, names, objectStoreContract, temporaries } from './object-store.contract.js';

const MiB = 1024 * 1024;
const FAST_RETRY = { attempts: 4, baseMs: 5, maxMs: 20 };

describe('s3 store', () => {
  const s3 = useS3();
  let proxy: FaultProxy;
  const stores: ObjectStore[] = [];

  beforeAll(async () => {
    proxy = await FaultProxy.start(Number(new URL(s3().endpoint).port));
  });
  afterAll(async () => {
    await proxy.stop();
  });
  afterEach(async () => {
    proxy.clear();
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  /** A store under a fresh prefix of the suite's bucket; through the fault proxy when asked. */
  function open(options: { viaProxy?: boolean; tuning?: StoreTuning } = {}): ObjectStore {
    const store = openObjectStore(
      {
        store: `s3://${s3().bucket}/${uniqueName('p-')}`,
        s3Endpoint: options.viaProxy ? proxy.endpoint : s3().endpoint,
        s3Region: s3().region,
        s3AccessKeyId: s3().accessKeyId,
        s3SecretAccessKey: s3().secretAccessKey,
        s3ForcePathStyle: true,
      },
      undefined,
      { retry: FAST_RETRY, partSize: 5 * MiB, ...options.tuning },
    );
    stores.push(store);
    return store;
  }

  // s3rver has no ListMultipartUploads; the listing itself is checked below against served pages.
  objectStoreContract('s3 (s3rver)', async () => open(), {
    largeBytes: 12 * MiB + 3,
    pausedWriteBytes: 5 * MiB + 1,
    temporaries: 'refused',
  });

  it('multipart - a large streaming write goes up in parts of partSize and completes as one object', async () => {
    const store = open({ viaProxy: true });
    const data = randomBytes(12 * MiB + 100);
    async function* body(): AsyncGenerator<Buffer> {
      for (let i = 0; i < data.length; i += 100_000) yield data.subarray(i, i + 100_000);
    }
    await store.write('big', body());
    expect(proxy.count('POST', '?uploads')).toBe(1);
    expect(proxy.count('PUT', 'partNumber=')).toBe(3);
    expect(proxy.count('POST', 'uploadId=')).toBe(1);
    const read = await collect(store.readStream('big'));
    expect(createHash('sha256').update(read).digest('hex')).toBe(
      createHash('sha256').update(data).digest('hex'),
    );
  });

  it("multipart - a part's buffer is filled again only once the server has answered for it", async () => {
    // Seven full parts, two in flight: later parts go into the buffers of parts already uploaded, and a
    // buffer reused while its part was still being sent would change what the server stored.
    const store = open({ viaProxy: true, tuning: { partConcurrency: 2 } });
    const data = randomBytes(35 * MiB + 12_345);
    async function* body(): AsyncGenerator<Buffer> {
      for (let i = 0; i < data.length; i += 300_001) yield data.subarray(i, i + 300_001);
    }
    await store.write('reused-parts', body());
    expect(proxy.count('PUT', 'partNumber=')).toBe(8);
    const read = await collect(store.readStream('reused-parts'));
    expect(read.length).toBe(data.length);
    expect(read.equals(data)).toBe(true);
  });

  it('multipart - a small write is a single PUT', async () => {
    const store = open({ viaProxy: true });
    async function* body(): AsyncGenerator<Buffer> {
      yield randomBytes(1000);
      yield randomBytes(1000);
    }
    await store.write('small', body());
    expect(proxy.requests.map((r) => r.method)).toEqual(['PUT']);
  });

  it('multipart - a body that fails midway aborts the upload and leaves no object', async () => {
    const store = open({ viaProxy: true });
    async function* body(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 7; i++) yield randomBytes(MiB);
      throw new Error('source failed');
    }
    await expect(store.write('half', body())).rejects.toThrow('source failed');
    expect(proxy.count('PUT', 'partNumber=')).toBe(1);
    expect(proxy.count('DELETE', 'uploadId=')).toBe(1);
    expect(await store.stat('half')).toBeNull();
    expect(await names(store, '')).toEqual([]);
  });

  it('retries - throttling and 5xx on PUT, GET and HEAD are retried, and the operation succeeds', async () => {
    const store = open({ viaProxy: true });
    proxy.inject({ kind: 'status', status: 503, code: 'SlowDown' }, { times: 2, method: 'PUT' });
    await store.write('r', Buffer.from('retried'));
    expect(proxy.count('PUT')).toBe(3);

    proxy.inject({ kind: 'status', status: 500, code: 'InternalError' }, { times: 2, method: 'GET' });
    expect((await store.readRange('r', 0, 100)).toString()).toBe('retried');
    expect(proxy.count('GET')).toBe(3);

    proxy.inject({ kind: 'status', status: 429, code: 'TooManyRequests' }, { times: 1, method: 'HEAD' });
    proxy.inject({ kind: 'reset' }, { times: 1, method: 'HEAD' });
    expect(await store.stat('r')).toMatchObject({ size: 7 });
    expect(proxy.count('HEAD')).toBe(3);
  });

  it('retries - a failed part of a multipart upload is retried alone', async () => {
    const store = open({ viaProxy: true });
    proxy.inject(
      { kind: 'status', status: 503, code: 'SlowDown' },
      { times: 1, method: 'PUT', urlIncludes: 'partNumber=2' },
    );
    const data = randomBytes(11 * MiB);
    await store.write('parts', data);
    expect(proxy.count('PUT', 'partNumber=1')).toBe(1);
    expect(proxy.count('PUT', 'partNumber=2')).toBe(2);
    expect((await collect(store.readStream('parts'))).equals(data)).toBe(true);
  });

  it('retries - a streaming read cut mid-body resumes from the last byte received', async () => {
    const store = open({ viaProxy: true });
    const data = randomBytes(3 * MiB);
    await store.write('stream', data);
    proxy.clear();
    proxy.inject({ kind: 'cut-body', afterBytes: MiB }, { times: 1, method: 'GET' });
    expect((await collect(store.readStream('stream', { offset: 1000 }))).equals(data.subarray(1000))).toBe(
      true,
    );
    const gets = proxy.requests.filter((r) => r.method === 'GET');
    expect(gets).toHaveLength(2);
    expect(gets[0]!.range).toBe('bytes=1000-');
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(gets[1]!.range ?? '')?.[1]);
    expect(resumedAt).toBeGreaterThan(1000);
    expect(resumedAt).toBeLessThanOrEqual(1000 + MiB);
  });

  it('retries - when every attempt fails: STORE_UNAVAILABLE naming the object, after the configured attempts', async () => {
    const store = open({ viaProxy: true });
    proxy.inject({ kind: 'status', status: 503, code: 'SlowDown' }, { times: 100, method: 'GET' });
    const err = await store.readRange('some/file.rf', 0, 10).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORE_UNAVAILABLE', retriable: true });
    expect((err as Error).message).toContain('some/file.rf');
    expect((err as Error).message).toContain('after 4 attempts');
    expect(proxy.count('GET')).toBe(4);
  });

  it('retries - access denied is not retried', async () => {
    const store = open({ viaProxy: true });
    proxy.inject({ kind: 'status', status: 403, code: 'AccessDenied' }, { times: 5, method: 'GET' });
    await expect(store.readRange('x', 0, 10)).rejects.toMatchObject({ code: 'INTERNAL', retriable: false });
    expect(proxy.count('GET')).toBe(1);
  });

  it('list - follows ListObjectsV2 continuation tokens across pages', async () => {
    // s3rver cannot paginate on Node >= 17 (its tokens use DES, which OpenSSL 3 dropped), so the pages
    // are served by a middleware in front of the client's transport.
    const store = open() as S3ObjectStore;
    const prefix = `${new URL(store.url).pathname.slice(1)}/`;
    const page = (keys: string[], next?: string): ListObjectsV2CommandOutput => ({
      $metadata: {},
      Contents: keys.map((k) => ({ Key: prefix + k, Size: k.length, LastModified: new Date(0) })),
      IsTruncated: next !== undefined,
      NextContinuationToken: next,
    });
    const pages: Record<string, ListObjectsV2CommandOutput> = {
      first: page(['l/0', 'l/1'], 't1'),
      t1: page(['l/2', 'l/3'], 't2'),
      t2: page(['l/4']),
    };
    const seen: (string | undefined)[] = [];
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'ListObjectsV2Command') return next(args);
        const input = args.input as ListObjectsV2CommandInput;
        seen.push(input.ContinuationToken);
        expect(input.Prefix).toBe(`${prefix}l/`);
        return { output: pages[input.ContinuationToken ?? 'first'] as never, response: {} };
      },
      { step: 'initialize' },
    );
    expect(await names(store, 'l/')).toEqual(['l/0', 'l/1', 'l/2', 'l/3', 'l/4']);
    expect(seen).toEqual([undefined, 't1', 't2']);
  });

  it('list - a real listing of more than a page, in key order, while other objects are being deleted', async () => {
    // Against the test server itself (scripts/s3rver.cjs mends its paging and its walk): the garbage
    // collector and `admin check` list a store that other processes delete from.
    const store = open();
    const kept = Array.from({ length: 1_050 }, (_, i) => `k/${String(i).padStart(5, '0')}`);
    const doomed = Array.from({ length: 300 }, (_, i) => `k/${String(i).padStart(5, '0')}-x`);
    const all = [...kept, ...doomed];
    for (let i = 0; i < all.length; i += 50)
      await Promise.all(all.slice(i, i + 50).map((k) => store.write(k, Buffer.from('v'))));
    const deleting = (async () => {
      for (const k of doomed) await store.delete(k);
    })();
    const listed = await names(store, 'k/');
    await deleting;
    expect(listed.filter((k) => !k.endsWith('-x'))).toEqual(kept);
    expect(await names(store, 'k/')).toEqual(kept);
  });

  it('proxy faults - a PUT cut half way that is not retried leaves no object at all, not half of one', async () => {
    // S3 stores a PUT whole or not at all; the test server is made to as well (scripts/s3rver.cjs).
    const store = open({ viaProxy: true, tuning: { retry: { attempts: 1, baseMs: 5, maxMs: 20 } } });
    proxy.inject({ kind: 'cut-request', fraction: 0.5 }, { times: 1, method: 'PUT' });
    await expect(store.write('cut/once', Buffer.alloc(256 * 1024, 1))).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    await new Promise((r) => setTimeout(r, 200)); // the server notices the abort after the client does
    expect(await store.stat('cut/once')).toBeNull();
    expect(await names(store, 'cut/')).toEqual([]);
  });

  it('proxy faults - a PUT cut half way and slow answers are retried; the object is whole', async () => {
    const store = open({ viaProxy: true });
    proxy.inject({ kind: 'cut-request', fraction: 0.5 }, { times: 2, method: 'PUT' });
    proxy.inject({ kind: 'delay', ms: 200 }, { times: 1, method: 'GET' });
    const body = Buffer.alloc(64 * 1024, 7);
    await store.write('half/put', body);
    expect(proxy.injected).toMatchObject({ 'cut-request': 2 });
    expect(proxy.count('PUT', 'half/put')).toBe(3);
    expect((await store.readRange('half/put', 0, body.length)).equals(body)).toBe(true);
    expect(proxy.injected).toMatchObject({ delay: 1 });
  });

  it('temporaries - incomplete multipart uploads under the prefix, following markers across pages', async () => {
    // Served by a middleware, as for ListObjectsV2 above: s3rver does not implement ListMultipartUploads.
    const store = open() as S3ObjectStore;
    const prefix = `${new URL(store.url).pathname.slice(1)}/`;
    const upload = (key: string, id: string) => ({ Key: key, UploadId: id, Initiated: new Date(7000) });
    const pages: Record<string, ListMultipartUploadsCommandOutput> = {
      first: {
        $metadata: {},
        Uploads: [upload(`${prefix}t/1/a.rf`, 'u1'), upload(`${prefix}t/1/sp ace.rf`, 'u2')],
        IsTruncated: true,
        NextKeyMarker: `${prefix}t/1/sp ace.rf`,
        NextUploadIdMarker: 'u2',
      },
      u2: { $metadata: {}, Uploads: [upload(`${prefix}t/2/b.rf`, 'u3')], IsTruncated: false },
    };
    const seen: [string | undefined, string | undefined][] = [];
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'ListMultipartUploadsCommand') return next(args);
        const input = args.input as ListMultipartUploadsCommandInput;
        seen.push([input.KeyMarker, input.UploadIdMarker]);
        expect(input.Prefix).toBe(`${prefix}t/`);
        return { output: pages[input.UploadIdMarker ?? 'first'] as never, response: {} };
      },
      { step: 'initialize' },
    );
    // A key no operation of the store accepts (a space) is another tool's, as in list.
    expect(await temporaries(store, 't/')).toEqual([
      { target: 't/1/a.rf', id: 'u1', modifiedMs: 7000 },
      { target: 't/2/b.rf', id: 'u3', modifiedMs: 7000 },
    ]);
    expect(seen).toEqual([
      [undefined, undefined],
      [`${prefix}t/1/sp ace.rf`, 'u2'],
    ]);
  });

  it('temporaries - a server without ListMultipartUploads is NOT_SUPPORTED at once, not retried', async () => {
    const store = open({ viaProxy: true });
    await expect(temporaries(store, 't/')).rejects.toMatchObject({ code: 'NOT_SUPPORTED', retriable: false });
    expect(proxy.count('GET', 'uploads')).toBe(1);
  });

  it('prefix - objects of one store prefix are invisible to another', async () => {
    const a = open();
    const b = open();
    await a.write('same/name', Buffer.from('a'));
    expect(await b.stat('same/name')).toBeNull();
    expect(await names(b, '')).toEqual([]);
    expect(await names(a, '')).toEqual(['same/name']);
  });

  it('config - a bad bucket name or half the credentials is a configuration error', () => {
    expect(() => openObjectStore({ store: 's3://Bad_Bucket/x' })).toThrow(/invalid bucket name/);
    expect(() => openObjectStore({ store: 's3://bucket/../x' })).toThrow(/invalid object name/);
    expect(() => openObjectStore({ store: 's3://bucket/x', s3AccessKeyId: 'id' })).toThrow(/both/);
  });

  it('sdk warning - the NodeVersionSupportWarning is not printed by the store (a plain client prints it)', async () => {
    const run = (mode: string): Promise<{ stdout: string; stderr: string }> =>
      new Promise((resolve, reject) => {
        const env = { ...process.env };
        delete env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
        const script = new URL('./support/s3-warning.ts', import.meta.url).pathname;
        const child = spawn(process.execPath, ['--import', 'tsx', script, mode, s3().endpoint], { env });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.once('error', reject);
        child.once('exit', () => resolve({ stdout, stderr }));
      });
    const [store, bare] = await Promise.all([run('store'), run('bare')]);
    expect(store.stdout).toContain('done');
    expect(store.stderr).not.toContain('NodeVersionSupportWarning');
    expect(bare.stdout).toContain('done');
    if (Number(process.versions.node.split('.')[0]) < 22)
      expect(bare.stderr).toContain('NodeVersionSupportWarning');
  });
});
