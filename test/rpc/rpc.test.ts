import { STATUS_CODES } from 'node:http';
import { connect } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ExcError } from '../../src/errors.js';
import { RpcClient, RpcServer, rpcKey, signRequest } from '../../src/rpc/index.js';
import { freePort } from '../../src/zk/embedded.js';

const SECRET = 'rpc-layer-test-secret-0123456789';

describe('rpc', () => {
  let server: RpcServer;
  let base: string;
  const calls = { flaky: 0, slow: 0, boom: 0 };
  const applied: number[] = [];

  beforeAll(async () => {
    server = new RpcServer({ secret: SECRET, maxBodyBytes: 64 * 1024, maxSkewMs: 1_000 });
    server.route(
      'POST',
      '/echo',
      {
        body: z.object({
          name: z.string().min(1),
          count: z.number().int().nonnegative(),
          tags: z.array(z.string()).default([]),
        }),
      },
      ({ body }) => ({ hello: body.name, count: body.count, tags: body.tags }),
    );
    server.route('POST', '/apply', { body: z.object({ n: z.number() }) }, ({ body }) => {
      applied.push(body.n);
      return { ok: true };
    });
    server.route('POST', '/flaky', {}, () => {
      calls.flaky++;
      if (calls.flaky <= 2) throw new ExcError('UNAVAILABLE', 'not yet');
      return { attempts: calls.flaky };
    });
    server.route('POST', '/slow', {}, async () => {
      calls.slow++;
      await new Promise((r) => setTimeout(r, 500));
      return { ok: true };
    });
    server.route('POST', '/boom', {}, () => {
      calls.boom++;
      throw new TypeError('a bug');
    });
    server.route('GET', '/things/:name', {}, ({ params }) => ({ name: params.name }));
    server.route('GET', '/things', {}, () => ({ list: true }));
    const { port } = await server.listen('127.0.0.1', 0);
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await server.close();
  });

  async function raw(path: string, body: string | Buffer, headers: Record<string, string>) {
    const res = await request(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });
    return {
      status: res.statusCode,
      json: (await res.body.json()) as { error?: { code: string; message: string } },
    };
  }

  function signed(path: string, body: Buffer, secret = SECRET, now?: number) {
    return signRequest(rpcKey(secret), {
      method: 'POST',
      host: new URL(base).host,
      path: `/v1${path}`,
      body,
      now,
    });
  }

  it('a signed, valid request is served', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET });
    await expect(client.post('/v1/echo', { name: 'ada', count: 2 })).resolves.toEqual({
      hello: 'ada',
      count: 2,
      tags: [],
    });
  });

  it('auth - a request without a signature gets 401', async () => {
    const res = await raw('/v1/echo', '{"name":"a","count":1}', {});
    expect(res.status).toBe(401);
    expect(res.json.error?.code).toBe('UNAUTHENTICATED');
  });

  it('auth - a request signed with another secret gets 401', async () => {
    const body = Buffer.from('{"name":"a","count":1}');
    const res = await raw('/v1/echo', body, signed('/echo', body, 'not-the-instance-secret-012345'));
    expect(res.status).toBe(401);
    expect(res.json.error?.message).toMatch(/bad signature/);
  });

  it('auth - a body changed after signing is refused (400 CONTENT_HASH_MISMATCH) and not served', async () => {
    const body = Buffer.from('{"n":41}');
    const before = applied.length;
    const res = await raw('/v1/apply', '{"n":42}', signed('/apply', body));
    expect(res.status).toBe(400);
    expect(res.json.error?.code).toBe('CONTENT_HASH_MISMATCH');
    expect(applied.length).toBe(before);
  });

  it('auth - a declared body hash changed after signing gets 401', async () => {
    const body = Buffer.from('{"n":43}');
    const headers = signed('/apply', body);
    const other = Buffer.from('{"n":44}');
    const forged = { ...headers, 'x-exc-content-sha256': signed('/apply', other)['x-exc-content-sha256']! };
    const res = await raw('/v1/apply', other, forged);
    expect(res.status).toBe(401);
    expect(res.json.error?.message).toMatch(/bad signature/);
  });

  it('auth - a stale or future-dated request gets 401', async () => {
    const body = Buffer.from('{"name":"a","count":1}');
    const stale = await raw('/v1/echo', body, signed('/echo', body, SECRET, Date.now() - 5_000));
    expect(stale.status).toBe(401);
    expect(stale.json.error?.message).toMatch(/freshness window/);
    const future = await raw('/v1/echo', body, signed('/echo', body, SECRET, Date.now() + 5_000));
    expect(future.status).toBe(401);
  });

  it('auth - a replayed request gets 401, inside the window (nonce) and after it (date), and is applied once', async () => {
    const body = Buffer.from('{"n":7}');
    const headers = signed('/apply', body);
    const first = await raw('/v1/apply', body, headers);
    expect(first.status).toBe(200);
    const replay = await raw('/v1/apply', body, headers);
    expect(replay.status).toBe(401);
    expect(replay.json.error?.message).toMatch(/replayed/);
    await new Promise((r) => setTimeout(r, 1_200)); // past the 1 s window of this server
    const late = await raw('/v1/apply', body, headers);
    expect(late.status).toBe(401);
    expect(applied.filter((n) => n === 7)).toHaveLength(1);
  });

  it('auth - a request signed for one process is refused by another of the same instance', async () => {
    // Another server with the same secret (a second tablet server, say): a request captured on its way
    // to the first, replayed to it within the window, is refused; it was never seen there.
    const other = new RpcServer({ secret: SECRET, maxSkewMs: 1_000 });
    const otherApplied: number[] = [];
    other.route('POST', '/apply', { body: z.object({ n: z.number() }) }, ({ body }) => {
      otherApplied.push(body.n);
      return { ok: true };
    });
    const { port } = await other.listen('127.0.0.1', 0);
    try {
      const body = Buffer.from('{"n":8}');
      const headers = signed('/apply', body); // signed for `base`
      const res = await request(`http://127.0.0.1:${port}/v1/apply`, {
        method: 'POST',
        // As captured: its Host names the first server (the signature covers it).
        headers: { 'content-type': 'application/json', host: new URL(base).host, ...headers },
        body,
      });
      expect(res.statusCode).toBe(401);
      expect(((await res.body.json()) as { error: { message: string } }).error.message).toMatch(
        /signed for another server/,
      );
      // With its Host rewritten to the second server, the signature no longer matches.
      const rewritten = await request(`http://127.0.0.1:${port}/v1/apply`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      expect(rewritten.statusCode).toBe(401);
      await rewritten.body.text();
      expect(otherApplied).toEqual([]);
      // The first server still takes it, once.
      expect((await raw('/v1/apply', body, headers)).status).toBe(200);
    } finally {
      await other.close();
    }
    // A server reached on another port than it listens on (EXC_ADVERTISE_PORT: a proxy, a port mapping)
    // takes requests signed for that port.
    const mapped = new RpcServer({ secret: SECRET, maxSkewMs: 1_000, advertisedPort: 40_123 });
    mapped.route('POST', '/apply', { body: z.object({ n: z.number() }) }, () => ({ ok: true }));
    const bound = await mapped.listen('127.0.0.1', 0);
    try {
      const body = Buffer.from('{"n":9}');
      const host = '127.0.0.1:40123';
      const res = await request(`http://127.0.0.1:${bound.port}/v1/apply`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          host,
          ...signRequest(rpcKey(SECRET), { method: 'POST', host, path: '/v1/apply', body }),
        },
        body,
      });
      expect(res.statusCode).toBe(200);
      await res.body.text();
    } finally {
      await mapped.close();
    }
  });

  it('validation - malformed JSON gets 400', async () => {
    const body = Buffer.from('{"name": "a", count');
    const res = await raw('/v1/echo', body, signed('/echo', body));
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: 'BAD_REQUEST' });
    expect(res.json.error?.message).toMatch(/not valid JSON/);
  });

  it('validation - a field of the wrong type gets 400 naming the field', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET });
    const err = (await client
      .post('/v1/echo', { name: 'a', count: 'three' })
      .catch((e: unknown) => e)) as ExcError;
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toMatch(/body\.count/);
    const nested = (await client
      .post('/v1/echo', { name: 'a', count: 1, tags: ['x', 5] })
      .catch((e: unknown) => e)) as ExcError;
    expect(nested.message).toMatch(/body\.tags\.1/);
    const missing = (await client.post('/v1/echo', { count: 1 }).catch((e: unknown) => e)) as ExcError;
    expect(missing.message).toMatch(/body\.name/);
  });

  it('limits - an oversized body gets 413 and is not served', async () => {
    const body = Buffer.from(JSON.stringify({ n: 1, pad: 'x'.repeat(100 * 1024) }));
    const before = applied.length;
    const res = await raw('/v1/apply', body, signed('/apply', body));
    expect(res.status).toBe(413);
    expect(res.json.error?.code).toBe('PAYLOAD_TOO_LARGE');
    expect(applied.length).toBe(before);
  });

  it('routing - an unknown path gets 404 after authentication, 401 before', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET });
    await expect(client.post('/v1/nope', {})).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await raw('/v1/nope', '{}', {})).status).toBe(401);
  });

  it('client - a path segment of . or .. reaches the server as given and signed (a URL would drop it)', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET });
    await expect(client.get('/v1/things/.')).resolves.toEqual({ name: '.' });
    await expect(client.get('/v1/things/..')).resolves.toEqual({ name: '..' });
    await expect(client.get('/v1/things/a')).resolves.toEqual({ name: 'a' });
  });

  it('health - /healthz answers without a signature', async () => {
    const res = await request(`${base}/healthz`);
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ ok: true });
  });

  it('client - retries when the server says it did not apply the request (503)', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET, backoffBaseMs: 5 });
    await expect(client.post('/v1/flaky', {})).resolves.toEqual({ attempts: 3 });
  });

  it('client - does not retry an internal error; the answer carries a stable code', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET, backoffBaseMs: 5 });
    await expect(client.post('/v1/boom', {}, { idempotent: true })).rejects.toMatchObject({
      code: 'INTERNAL',
    });
    expect(calls.boom).toBe(1);
  });

  it('client - a timeout is retried only for idempotent calls', async () => {
    const client = new RpcClient({ baseUrl: base, secret: SECRET, backoffBaseMs: 5, timeoutMs: 100 });
    calls.slow = 0;
    await expect(client.post('/v1/slow', {})).rejects.toMatchObject({ code: 'TIMEOUT' });
    expect(calls.slow).toBe(1);
    calls.slow = 0;
    await expect(client.post('/v1/slow', {}, { idempotent: true, attempts: 3 })).rejects.toMatchObject({
      code: 'TIMEOUT',
    });
    expect(calls.slow).toBe(3);
  });

  it('client - a refused connection is retried, then reported as UNAVAILABLE naming the address', async () => {
    const port = await freePort();
    const client = new RpcClient({
      baseUrl: `http://127.0.0.1:${port}`,
      secret: SECRET,
      backoffBaseMs: 5,
      attempts: 3,
    });
    const err = (await client.post('/v1/apply', { n: 1 }).catch((e: unknown) => e)) as ExcError;
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toContain(`127.0.0.1:${port}`);
  });

  /** Sends raw bytes on a new connection; resolves with everything the server answered before closing. */
  function rawBytes(bytes: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(new URL(base).port), '127.0.0.1', () => socket.write(bytes));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  }

  it('malformed HTTP - answered with the JSON error body and a stable code, and the server goes on', async () => {
    for (const [bytes, status, message] of [
      ['GARBAGE\r\n\r\n', 400, /malformed HTTP request \(HPE_/],
      ['GET /v1/ping HTTP/1.1\r\nbad header line\r\n\r\n', 400, /malformed HTTP request/],
      [`GET /v1/ping HTTP/1.1\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, /headers too large/],
    ] as const) {
      const answer = await rawBytes(bytes);
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      expect(head.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${STATUS_CODES[status]}`);
      expect(head).toMatch(/content-type: application\/json/);
      const parsed = JSON.parse(body) as { error: { code: string; message: string } };
      expect(parsed.error.code).toBe('BAD_REQUEST');
      expect(parsed.error.message).toMatch(message);
    }
    // Still serving.
    const client = new RpcClient({ baseUrl: base, secret: SECRET });
    expect(await client.get('/v1/ping')).toEqual({});
  });
});
