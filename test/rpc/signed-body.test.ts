/**
 * The RPC layer of a real process (a manager) refuses a request before reading its body unless the
 * request is signed, checks the body against the hash the signature covers, and names objects by their
 * key in the store, never by an absolute path on the server (issue 19).
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { rpcKey, signRequest } from '../../src/rpc/auth.js';
import type { TableInfo } from '../../src/meta/views.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

interface RawAnswer {
  status: number;
  body: string;
  /** Whether the server closed the connection after answering. */
  closed: boolean;
}

/**
 * Sends a request's head and only `sent` bytes of the body it declares, and resolves with the answer: a
 * server that waited for the whole body would never answer (the test's timeout).
 */
function partialRequest(
  url: string,
  head: { method: string; path: string; headers: Record<string, string> },
  sent: Buffer,
  timeoutMs = 10_000,
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closed = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms: the server waited for the body`));
    }, timeoutMs);
    const finish = (): void => {
      const text = Buffer.concat(chunks).toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      clearTimeout(timer);
      resolve({ status, body, closed });
    };
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(text)?.[1];
      if (end >= 0 && length !== undefined && text.length >= end + 4 + Number(length)) {
        // Complete: see whether the server closes the connection.
        setTimeout(() => {
          finish();
          socket.destroy();
        }, 300);
      }
    });
    socket.on('end', () => (closed = true));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined); // a reset after the answer is what a closed connection looks like
    const lines = [
      `${head.method} ${head.path} HTTP/1.1`,
      `host: ${hostname}:${port}`,
      ...Object.entries(head.headers).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ];
    socket.write(lines.join('\r\n'));
    socket.write(sent);
  });
}

describe('rpc - a real process', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('auth - an unsigned or badly signed request is refused before its body is read, and its connection closed', async () => {
    const manager = await cluster().startManager();
    const url = (await manager.waitForLog((l) => l.msg === 'manager active')).url as string;
    const json = { 'content-type': 'application/json' };
    // 1 MiB declared (under the 16 MiB limit), 10 bytes sent: answered at once.
    const unsigned = await partialRequest(
      url,
      { method: 'POST', path: '/v1/tables', headers: { ...json, 'content-length': String(1 << 20) } },
      Buffer.from('{"name":"t'),
    );
    expect(unsigned.status).toBe(401);
    expect(JSON.parse(unsigned.body)).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    expect(unsigned.closed).toBe(true);

    // Over the limit and unsigned: 401, not 413 (the limit is no longer what stops an unknown client).
    const huge = await partialRequest(
      url,
      { method: 'POST', path: '/v1/tables', headers: { ...json, 'content-length': String(64 << 20) } },
      Buffer.alloc(1024, 0x20),
    );
    expect(huge.status).toBe(401);

    // Signed with another secret, or signed without the body hash (an older client): 401 as well.
    const body = Buffer.from(JSON.stringify({ name: 'never' }));
    const wrongKey = signRequest(rpcKey('some-other-secret-0123456789'), {
      method: 'POST',
      host: new URL(url).host,
      path: '/v1/tables',
      body,
    });
    const { 'x-exc-content-sha256': _omitted, ...noHash } = signRequest(rpcKey(cluster().secret), {
      method: 'POST',
      host: new URL(url).host,
      path: '/v1/tables',
      body,
    });
    for (const [headers, reason] of [
      [wrongKey, /bad signature/],
      [noHash, /missing x-exc-content-sha256/],
    ] as const) {
      const r = await partialRequest(
        url,
        {
          method: 'POST',
          path: '/v1/tables',
          headers: { ...json, ...headers, 'content-length': String(1 << 20) },
        },
        body,
      );
      expect(r.status).toBe(401);
      expect((JSON.parse(r.body) as { error: { message: string } }).error.message).toMatch(reason);
    }

    // A flood of them is answered as fast as it comes, none buffered: 64 connections each declaring 15 MiB.
    const started = Date.now();
    const flood = await Promise.all(
      Array.from({ length: 64 }, () =>
        partialRequest(
          url,
          { method: 'POST', path: '/v1/tables', headers: { ...json, 'content-length': String(15 << 20) } },
          Buffer.alloc(64 << 10, 0x20),
        ),
      ),
    );
    expect(flood.map((r) => r.status)).toEqual(flood.map(() => 401));
    expect(Date.now() - started).toBeLessThan(20_000);

    const meta = await cluster().meta();
    expect((await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables')).tables).toEqual([]);
  });

  it('auth - a signed request is held to its declared body (its hash, the size limit) and to a path that decodes', async () => {
    const manager = await cluster().startManager({ env: { EXC_RPC_MAX_BODY_BYTES: String(1 << 20) } });
    const url = (await manager.waitForLog((l) => l.msg === 'manager active')).url as string;
    const key = rpcKey(cluster().secret);
    const signed = (body: Buffer) => ({
      'content-type': 'application/json',
      ...signRequest(key, { method: 'POST', host: new URL(url).host, path: '/v1/tables', body }),
    });

    // A body of the declared length that is not the signed one: refused with a stable code, not applied.
    const sent = Buffer.from(JSON.stringify({ name: 'aaaa' }));
    const other = Buffer.from(JSON.stringify({ name: 'bbbb' }));
    const res = await fetch(`${url}/v1/tables`, { method: 'POST', headers: signed(sent), body: other });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('CONTENT_HASH_MISMATCH');
    expect(answer.error.message).toMatch(/does not match its signed hash/);

    // Signed, but declaring more than the limit: 413 at once, before the body.
    const big = await partialRequest(
      url,
      { method: 'POST', path: '/v1/tables', headers: { ...signed(sent), 'content-length': String(2 << 20) } },
      sent,
    );
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } });

    const meta = await cluster().meta();
    expect((await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables')).tables).toEqual([]);
    // A path whose percent-encoding does not decode is the client's mistake: 400, not 500.
    for (const path of ['/v1/tables/%E0%A4', '/v1/queues/%zz', '/v1/tables/%']) {
      const host = new URL(url).host;
      const res = await fetch(`${url}${path}`, { headers: signRequest(key, { method: 'GET', host, path }) });
      expect(res.status, path).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: 'BAD_REQUEST' } });
    }

    // And the signed request itself works.
    await meta.call('POST', '/v1/tables', { name: 'aaaa' });
    expect((await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables')).tables.map((t) => t.name)).toEqual(
      ['aaaa'],
    );
  });
});

describe('rpc - what error answers show', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('paths - a missing or corrupt file is named by its key in the store, never by a path on the server', async () => {
    const s = await cluster().startWithTable({ table: 't' });
    await s.client.ingest('t', [{ row: 'a', value: 'v' }]);
    const [tablet] = await s.client.tablets('t');
    const file = tablet!.files[0]!.name;
    const store = cluster().store();
    const scanError = async () => {
      const err = await (async () => {
        for await (const _ of s.client.scan('t')) void _;
      })().then(
        () => undefined,
        (e: unknown) => e as { code: string; message: string },
      );
      if (!err) throw new Error('the scan succeeded');
      return err;
    };

    await store.write(file, Buffer.from('not an rfile at all, but long enough to have a footer tail ......'));
    const corrupt = await scanError();
    expect(corrupt.code).toBe('CORRUPT_FILE');
    expect(corrupt.message).toContain(file);

    await store.delete(file);
    const missing = await scanError();
    expect(missing.code).toBe('OBJECT_NOT_FOUND');
    expect(missing.message).toContain(file);

    for (const err of [corrupt, missing]) {
      expect(err.message).not.toContain(cluster().storePath);
      expect(err.message).not.toMatch(/file:\/\//);
    }
  });
});
