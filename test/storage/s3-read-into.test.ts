/**
 * GetObject bodies read into the caller's memory (src/storage/s3-read-into.ts): through the store
 * against a real S3 server and the fault proxy, and the handler alone against servers that answer in
 * ways s3rver never does (a head a byte at a time, chunked bodies, silence, garbage, TLS).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { createServer as createTlsServer } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpRequest } from '@smithy/types';
import { isTransientS3Error, openObjectStore, type ObjectStore } from '../../src/storage/index.js';
import { ReadIntoHandler } from '../../src/storage/s3-read-into.js';
import { uniqueName, useS3 } from '../support/index.js';
import { FaultProxy } from '../support/fault-proxy.js';

const MiB = 1024 * 1024;

/** An allocator that remembers the memory it gave. */
function memory(): { alloc: (size: number) => Buffer; given: Set<ArrayBufferLike> } {
  const given = new Set<ArrayBufferLike>();
  return {
    given,
    alloc: (size) => {
      const b = Buffer.alloc(size);
      given.add(b.buffer);
      return b;
    },
  };
}

async function chunksOf(stream: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

describe('s3 reads into caller memory, through the store', () => {
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

  function open(): ObjectStore {
    const store = openObjectStore(
      {
        store: `s3://${s3().bucket}/${uniqueName('ri-')}`,
        s3Endpoint: proxy.endpoint,
        s3Region: s3().region,
        s3AccessKeyId: s3().accessKeyId,
        s3SecretAccessKey: s3().secretAccessKey,
        s3ForcePathStyle: true,
      },
      undefined,
      { retry: { attempts: 4, baseMs: 5, maxMs: 20 } },
    );
    stores.push(store);
    return store;
  }

  it('a read cut mid-body resumes from the last byte received, into the same memory', async () => {
    const store = open();
    const data = randomBytes(3 * MiB);
    await store.write('cut', data);
    proxy.clear();
    proxy.inject({ kind: 'cut-body', afterBytes: MiB }, { times: 1, method: 'GET' });
    const { alloc, given } = memory();
    const chunks = await chunksOf(store.readStream('cut', { offset: 10, alloc }));
    expect(Buffer.concat(chunks).equals(data.subarray(10))).toBe(true);
    expect(proxy.count('GET')).toBe(2);
    expect(chunks.every((c) => given.has(c.buffer))).toBe(true);
  });

  it('error answers are the SDK errors they were: retried when transient, OBJECT_NOT_FOUND, not retried when denied', async () => {
    const store = open();
    await store.write('st', Buffer.from('status'));
    const { alloc } = memory();
    proxy.inject({ kind: 'status', status: 503, code: 'SlowDown' }, { times: 2, method: 'GET' });
    expect(Buffer.concat(await chunksOf(store.readStream('st', { alloc }))).toString()).toBe('status');
    expect(proxy.count('GET')).toBe(3);

    await expect(chunksOf(store.readStream('missing', { alloc }))).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
    });

    proxy.clear();
    proxy.inject({ kind: 'status', status: 403, code: 'AccessDenied' }, { times: 5, method: 'GET' });
    await expect(chunksOf(store.readStream('st', { alloc }))).rejects.toMatchObject({
      code: 'INTERNAL',
      retriable: false,
    });
    expect(proxy.count('GET')).toBe(1);

    proxy.clear();
    proxy.inject({ kind: 'reset' }, { times: 1, method: 'GET' });
    expect(Buffer.concat(await chunksOf(store.readStream('st', { alloc }))).toString()).toBe('status');
  });

  it('reads one after another go over one connection', async () => {
    const store = open();
    const data = randomBytes(700_000);
    for (let i = 0; i < 5; i++) await store.write(`k/${i}`, data);
    const { alloc } = memory();
    await chunksOf(store.readStream('k/0', { alloc }));
    const before = proxy.connectionsAccepted;
    for (let i = 1; i < 5; i++) {
      expect(Buffer.concat(await chunksOf(store.readStream(`k/${i}`, { alloc }))).equals(data)).toBe(true);
    }
    expect(proxy.connectionsAccepted - before).toBe(0);
  });

  it('an abort mid-body fails the read with its reason, and the next read is whole', async () => {
    const store = open();
    const data = randomBytes(4 * MiB);
    await store.write('ab', data);
    const { alloc } = memory();
    const controller = new AbortController();
    const reason = new Error('stop reading');
    let seen = 0;
    const read = (async () => {
      for await (const c of store.readStream('ab', { alloc, signal: controller.signal })) {
        seen += c.length;
        if (seen > MiB) controller.abort(reason);
      }
    })();
    await expect(read).rejects.toBe(reason);
    expect(Buffer.concat(await chunksOf(store.readStream('ab', { alloc }))).equals(data)).toBe(true);
  });
});

/** A server that answers each request on a connection as `answer` says (keep-alive by default). */
async function scripted(
  answer: (socket: Socket, head: string, n: number) => void,
  tls = false,
  host = '127.0.0.1',
): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<Socket>();
  const onSocket = (socket: Socket): void => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      for (let end = text.indexOf('\r\n\r\n'); end >= 0; end = text.indexOf('\r\n\r\n')) {
        const head = text.slice(0, end);
        text = text.slice(end + 4);
        answer(socket, head, requests++);
      }
    });
  };
  const server: Server = tls
    ? createTlsServer({ key: readFileSync(TLS_KEY), cert: readFileSync(TLS_CERT) }, onSocket)
    : createNetServer(onSocket);
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A self-signed certificate for localhost and 127.0.0.1, valid until 2126 (openssl req -x509). */
const TLS_CERT = new URL('../fixtures/tls/localhost.crt', import.meta.url);
const TLS_KEY = new URL('../fixtures/tls/localhost.key', import.meta.url);

describe('s3 reads into caller memory, the handler against scripted servers', () => {
  const inner = {
    handle: () => Promise.reject(new Error('passed to the SDK handler')),
    destroy: () => undefined,
  } as unknown as NodeHttpHandler;
  const handlers: ReadIntoHandler[] = [];
  const servers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const h of handlers.splice(0)) h.destroy();
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  function handler(socketTimeoutMs = 5_000): ReadIntoHandler {
    const h = new ReadIntoHandler({
      inner,
      connectionTimeoutMs: 2_000,
      socketTimeoutMs,
      tls: { ca: readFileSync(TLS_CERT) },
    });
    handlers.push(h);
    return h;
  }

  async function server(...args: Parameters<typeof scripted>): ReturnType<typeof scripted> {
    const s = await scripted(...args);
    servers.push(s);
    return s;
  }

  const get = (port: number, protocol = 'http:'): HttpRequest => ({
    method: 'GET',
    protocol,
    hostname: protocol === 'https:' ? 'localhost' : '127.0.0.1',
    port,
    path: '/bucket/some%20key',
    query: { 'x-id': 'GetObject' },
    headers: { host: `127.0.0.1:${port}`, range: 'bytes=0-' },
  });

  async function fetchBody(h: ReadIntoHandler, request: HttpRequest, alloc: (n: number) => Buffer) {
    const { response } = await h.handle(request, { readInto: alloc });
    return { response, chunks: await chunksOf(response.body as Readable) };
  }

  const ok = (body: Buffer, extra = ''): Buffer =>
    Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n${extra}\r\n`), body]);

  it('sends the request the SDK built; a head a byte at a time, then the body, all in the caller memory', async () => {
    const data = randomBytes(900_000);
    let seen = '';
    const s = await server((socket, head) => {
      seen = head;
      const answer = ok(data);
      const headBytes = answer.indexOf('\r\n\r\n') + 4;
      let i = 0;
      const drip = (): void => {
        if (i < headBytes) {
          socket.write(answer.subarray(i, ++i));
          setTimeout(drip, 1);
        } else socket.write(answer.subarray(headBytes));
      };
      socket.setNoDelay(true);
      drip();
    });
    const { alloc, given } = memory();
    const { response, chunks } = await fetchBody(handler(), get(s.port), alloc);
    expect(seen).toBe(
      `GET /bucket/some%20key?x-id=GetObject HTTP/1.1\r\nhost: 127.0.0.1:${s.port}\r\nrange: bytes=0-`,
    );
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-length']).toBe(String(data.length));
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunks.every((c) => given.has(c.buffer))).toBe(true);
  });

  it('a chunked body, cut across reads at odd places, comes out whole and in pieces of its own memory', async () => {
    const data = randomBytes(300_000);
    const s = await server((socket) => {
      const parts: Buffer[] = [Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n')];
      for (let at = 0, size = 1; at < data.length; at += size, size = (size * 7 + 3) % 70_000 || 1) {
        const piece = data.subarray(at, at + size);
        parts.push(Buffer.from(`${piece.length.toString(16)};ext=1\r\n`), piece, Buffer.from('\r\n'));
      }
      parts.push(Buffer.from('0\r\nx-trailer: 1\r\n\r\n'));
      const all = Buffer.concat(parts);
      for (let at = 0; at < all.length; at += 33_333) socket.write(all.subarray(at, at + 33_333));
    });
    const { alloc, given } = memory();
    const h = handler();
    const { chunks } = await fetchBody(h, get(s.port), alloc);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunks.some((c) => given.has(c.buffer))).toBe(false);
    // The connection is whole after the last chunk and its trailer: the next request uses it.
    expect(Buffer.concat((await fetchBody(h, get(s.port), alloc)).chunks).equals(data)).toBe(true);
    expect(s.connections()).toBe(1);
  });

  it('keeps a connection for the next request unless the server says close; a body framed by the end is whole', async () => {
    const data = randomBytes(100_000);
    const s = await server((socket, _head, n) => {
      if (n === 2) socket.write(ok(data, 'connection: close\r\n'), () => socket.end());
      else if (n === 3) socket.end(Buffer.concat([Buffer.from('HTTP/1.0 200 OK\r\n\r\n'), data]));
      else socket.write(ok(data));
    });
    const h = handler();
    const { alloc } = memory();
    for (let i = 0; i < 4; i++) {
      expect(Buffer.concat((await fetchBody(h, get(s.port), alloc)).chunks).equals(data)).toBe(true);
    }
    // Requests 0-2 on the first connection; 3 on a second one (2 said close).
    expect(s.connections()).toBe(2);
  });

  it('a connection dropped mid-body fails the body with ECONNRESET, which the store retries', async () => {
    const s = await server((socket) => {
      socket.write(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n'));
      socket.write(randomBytes(300_000), () => setTimeout(() => socket.destroy(), 20));
    });
    const { alloc } = memory();
    const err = await fetchBody(handler(), get(s.port), alloc).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ECONNRESET' });
    expect(isTransientS3Error(err)).toBe(true);
  });

  it('a silent server is a TimeoutError, and garbage instead of a status line an error worth retrying', async () => {
    const silent = await server(() => undefined);
    const { alloc } = memory();
    const t0 = Date.now();
    const timeout = await fetchBody(handler(300), get(silent.port), alloc).catch((e: unknown) => e);
    expect(timeout).toMatchObject({ name: 'TimeoutError' });
    expect(isTransientS3Error(timeout)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(5_000);

    const garbled = await server((socket) => socket.write('SMTP ready\r\n\r\n'));
    const bad = await fetchBody(handler(), get(garbled.port), alloc).catch((e: unknown) => e);
    expect((bad as Error).message).toMatch(/not an HTTP\/1\.x status line/);
    expect(isTransientS3Error(bad)).toBe(true);
  });

  it('an abort before the answer rejects with the signal reason', async () => {
    const silent = await server(() => undefined);
    const controller = new AbortController();
    const { alloc } = memory();
    const pending = handler().handle(get(silent.port), {
      readInto: alloc,
      abortSignal: controller.signal as never,
    });
    const reason = new Error('no longer wanted');
    setTimeout(() => controller.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);
  });

  it('over TLS: the body decrypted into the caller memory, each buffer filled by many reads', async () => {
    const data = randomBytes(2 * MiB + 1000);
    const s = await server((socket) => socket.write(ok(data)), true);
    const { alloc, given } = memory();
    const { chunks } = await fetchBody(handler(), get(s.port, 'https:'), alloc);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunks.every((c) => given.has(c.buffer))).toBe(true);
    // TLS hands over at most 16 KiB a read; a buffer of 256 KiB takes sixteen of them, not one.
    expect(given.size).toBe(Math.ceil(data.length / (256 * 1024)));
    expect(chunks.slice(0, -1).every((c) => c.length === 256 * 1024)).toBe(true);
  });

  it('a bad length or coding in an answer fails that request, not the process; 1xx and 204 are answered', async () => {
    const s = await server((socket, _head, n) => {
      if (n === 0) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello');
      else if (n === 1) socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n');
      else if (n === 2)
        socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      else socket.write('HTTP/1.1 204 No Content\r\n\r\n');
    });
    const h = handler();
    const { alloc } = memory();
    await expect(fetchBody(h, get(s.port), alloc)).rejects.toThrow(/content-length "5, 5"/);
    await expect(fetchBody(h, get(s.port), alloc)).rejects.toThrow(/transfer-encoding gzip, chunked/);
    const interim = await fetchBody(h, get(s.port), alloc);
    expect([interim.response.statusCode, Buffer.concat(interim.chunks).toString()]).toEqual([200, 'ok']);
    const empty = await fetchBody(h, get(s.port), alloc);
    expect([empty.response.statusCode, empty.chunks.length]).toEqual([204, 0]);
  });

  it('a request that meets a connection the server closed while idle goes again on a new one', async () => {
    const data = randomBytes(50_000);
    const s = await server((socket, _head, n) => {
      if (n === 0) socket.write(ok(data), () => setTimeout(() => socket.end(), 10));
      // Closed without an answer, as a server that timed the connection out just as the request came.
      else if (n === 1) socket.write(ok(data));
      else if (n === 2) socket.destroy();
      else socket.write(ok(data));
    });
    const h = handler();
    const { alloc } = memory();
    // 0 is answered, then the server closes that connection; 1 goes on a new one (the idle one was
    // seen closing), 2 meets a connection closed without an answer and goes again as 3.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 30));
      expect(Buffer.concat((await fetchBody(h, get(s.port), alloc)).chunks).equals(data)).toBe(true);
    }
    expect(s.connections()).toBe(3);
  });

  it("an idle connection is closed a second before the server's Keep-Alive timeout says it will be", async () => {
    const data = randomBytes(10_000);
    // timeout=2: kept for a second; timeout=1: not kept at all. The server itself never closes.
    const s = await server((socket, _head, n) =>
      socket.write(ok(data, `keep-alive: timeout=${n < 2 ? 2 : 1}\r\n`)),
    );
    const h = handler();
    const { alloc } = memory();
    const read = async () =>
      expect(Buffer.concat((await fetchBody(h, get(s.port), alloc)).chunks).equals(data)).toBe(true);
    await read();
    await read(); // at once: the same connection
    expect(s.connections()).toBe(1);
    await new Promise((r) => setTimeout(r, 1_300));
    await read(); // past timeout - 1 s: a new connection, which says timeout=1
    expect(s.connections()).toBe(2);
    await read(); // at once, but that one was not kept
    expect(s.connections()).toBe(3);
  });

  it('a 408 on a connection used before goes again on a new one; on a fresh connection it is the answer', async () => {
    const data = randomBytes(20_000);
    const timedOut = 'HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';
    const s = await server((socket, _head, n) => {
      // 1: the server timed the idle connection out as the request came; 3: a fresh connection's first.
      if (n === 1 || n === 3) socket.end(timedOut);
      else socket.write(ok(data), () => n === 2 && socket.end());
    });
    const h = handler();
    const { alloc } = memory();
    for (let i = 0; i < 2; i++) {
      expect(Buffer.concat((await fetchBody(h, get(s.port), alloc)).chunks).equals(data)).toBe(true);
    }
    expect(s.connections()).toBe(2);
    await new Promise((r) => setTimeout(r, 30)); // the second connection's close is seen while idle
    const { response } = await fetchBody(h, get(s.port), alloc);
    expect(response.statusCode).toBe(408);
    expect(s.connections()).toBe(3);
  });

  it('an IPv6 endpoint, bracketed as the SDK keeps it', async () => {
    const data = randomBytes(10_000);
    const s = await server((socket) => socket.write(ok(data)), false, '::1');
    const { alloc } = memory();
    const { chunks } = await fetchBody(handler(), { ...get(s.port), hostname: '[::1]' }, alloc);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
  });

  it('destroy closes every idle connection', async () => {
    let open = 0;
    const s = await server((socket) => {
      open++;
      socket.once('close', () => open--);
      socket.write(ok(Buffer.from('x')));
    });
    const h = handler();
    const { alloc } = memory();
    await Promise.all([1, 2, 3, 4].map(() => fetchBody(h, get(s.port), alloc)));
    expect(s.connections()).toBe(4);
    h.destroy();
    for (let i = 0; i < 100 && open > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(open).toBe(0);
  });

  it('a path or header that would break the request line is refused before any connection', async () => {
    const s = await server(() => undefined);
    const { alloc } = memory();
    await expect(
      handler().handle({ ...get(s.port), headers: { 'x-a': 'v\r\nx-b: 1' } }, { readInto: alloc }),
    ).rejects.toThrow(/control character or a line break/);
    await expect(
      handler().handle({ ...get(s.port), path: '/a b HTTP/1.1' }, { readInto: alloc }),
    ).rejects.toThrow(/not sendable/);
    expect(s.connections()).toBe(0);
  });

  it('a request that is not a GET marked with readInto goes to the SDK handler', async () => {
    const h = handler();
    const { alloc } = memory();
    await expect(h.handle({ ...get(1), method: 'PUT' }, { readInto: alloc })).rejects.toThrow(
      'passed to the SDK handler',
    );
    await expect(h.handle(get(1), {})).rejects.toThrow('passed to the SDK handler');
  });
});
