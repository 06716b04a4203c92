/**
 * Who may use the monitor: on loopback anyone on the host (but not a page from elsewhere through the
 * browser), beyond it only holders of the login token. The cluster is a stand-in here: what is checked
 * is the door, not the data.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { isLoopback, MonitorServer } from '../../src/monitor/server.js';
import type { Snapshot, SnapshotReader } from '../../src/monitor/snapshot.js';

const snapshot: Snapshot = {
  at: Date.now(),
  queues: [],
  compactors: [],
  running: [],
  parked: [],
  tablets: [],
  readBytesPerSec: 0,
  error: null,
};
const reader = { read: async () => snapshot } as unknown as SnapshotReader;
const calls: string[] = [];
const call = async <T>(method: string, path: string): Promise<T> => {
  calls.push(`${method} ${path}`);
  return { cancelled: true } as T;
};
const TOKEN = 'a-token-of-more-than-16-chars';

/** A request with a Host header of our choosing (fetch always sends the URL's own). */
function withHost(
  url: string,
  host: string,
  method = 'GET',
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { ...headers, host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('monitor server', () => {
  const servers: MonitorServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
    calls.length = 0;
  });

  async function start(host: string, token?: string): Promise<string> {
    const server = new MonitorServer({
      host,
      port: 0,
      reader,
      call,
      log: silentLogger(),
      ...(token ? { token } : {}),
    });
    servers.push(server);
    const url = await server.start();
    return url.replace('0.0.0.0', '127.0.0.1');
  }

  it('monitor - beyond loopback it refuses to start without a token of 16 characters or more', () => {
    expect(() => new MonitorServer({ host: '0.0.0.0', port: 0, reader, call, log: silentLogger() })).toThrow(
      /login token/,
    );
    expect(
      () =>
        new MonitorServer({ host: '0.0.0.0', port: 0, reader, call, log: silentLogger(), token: 'short' }),
    ).toThrow(/16 characters/);
  });

  it('monitor - beyond loopback only the token opens it: login link, cookie or bearer', async () => {
    const url = await start('0.0.0.0', TOKEN);
    expect((await fetch(`${url}api/state`)).status).toBe(401);
    expect((await fetch(url)).status).toBe(401);
    expect(
      (await fetch(`${url}login?token=wrong-token-of-the-same-size`, { redirect: 'manual' })).status,
    ).toBe(401);
    const login = await fetch(`${url}login?token=${TOKEN}`, { redirect: 'manual' });
    expect(login.status).toBe(303);
    const cookie = login.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    const session = cookie.split(';')[0]!;
    expect((await fetch(`${url}api/state`, { headers: { cookie: session } })).status).toBe(200);
    expect((await fetch(url, { headers: { cookie: session } })).status).toBe(200);
    // A cookie that is not valid percent-encoding is no cookie: 401, never a 500.
    const mangled = { cookie: 'excompact_monitor=%E0%A4%A' };
    expect((await fetch(`${url}api/state`, { headers: mangled })).status).toBe(401);
    expect((await fetch(`${url}api/state`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(
      200,
    );
    // The token opens reads; a change still needs the page's header.
    const ecid = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
    const cancel = (headers: Record<string, string>) =>
      fetch(`${url}api/compactions/${ecid}/cancel`, {
        method: 'POST',
        headers: { cookie: session, ...headers },
      });
    expect((await cancel({})).status).toBe(403);
    expect(calls).toEqual([]);
    expect((await cancel({ 'x-excompact-monitor': '1' })).status).toBe(200);
    expect(calls).toEqual([`POST /v1/compactions/${ecid}/cancel`]);
  });

  it('monitor - on loopback: no token, but a bad compaction id is refused before reaching the cluster', async () => {
    const url = await start('127.0.0.1');
    expect((await fetch(`${url}api/state`)).status).toBe(200);
    const bad = await fetch(`${url}api/compactions/..%2F..%2Fqueues/cancel`, {
      method: 'POST',
      headers: { 'x-excompact-monitor': '1' },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
    const badParked = await fetch(`${url}api/parked/..%2Frelease/cancel`, {
      method: 'POST',
      headers: { 'x-excompact-monitor': '1' },
    });
    expect(badParked.status).toBe(400);
    expect(calls).toEqual([]);
    // A parked job's id passes through to the manager's cancel.
    const key = '3f9c2a1b0d4e5f60718293a4';
    const parked = await fetch(`${url}api/parked/${key}/cancel`, {
      method: 'POST',
      headers: { 'x-excompact-monitor': '1' },
    });
    expect(parked.status).toBe(200);
    expect(calls).toEqual([`POST /v1/compactions/${key}/cancel`]);
  });

  it('monitor - on loopback a Host that only starts with 127. is refused (DNS rebinding), before any cluster call', async () => {
    const url = await start('127.0.0.1');
    const ecid = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
    for (const host of ['127.attacker.example', '127.0.0.1.attacker.example:80', '127.evil', '1270.0.0.1']) {
      const state = await withHost(`${url}api/state`, host);
      expect(state.status, host).toBe(403);
      expect(JSON.parse(state.body), host).toMatchObject({ error: { code: 'FORBIDDEN' } });
      const cancel = await withHost(`${url}api/compactions/${ecid}/cancel`, host, 'POST', {
        'x-excompact-monitor': '1',
      });
      expect(cancel.status, host).toBe(403);
    }
    expect(calls).toEqual([]);
    // Real loopback names still pass: localhost, IPv6 ::1, any IPv4 literal in 127/8.
    for (const host of ['localhost:1', '[::1]:1', '127.0.0.1', '127.1.2.3:8080'])
      expect((await withHost(`${url}api/state`, host)).status, host).toBe(200);
    expect([isLoopback('::1'), isLoopback('127.255.0.1'), isLoopback('127.attacker.example')]).toEqual([
      true,
      true,
      false,
    ]);
  });

  it('monitor - a malformed or foreign id in an action path is a 400 BAD_REQUEST and reaches no cluster', async () => {
    const url = await start('127.0.0.1');
    const post = (path: string) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'x-excompact-monitor': '1' } });
    for (const path of [
      'api/compactions/%ZZ/cancel',
      'api/parked/%ZZ/release',
      'api/parked/%ZZ/cancel',
      'api/parked/not-a-parked-id/release',
      'api/parked/..%2F..%2Fqueues/release',
    ]) {
      const res = await post(path);
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code, path).toBe('BAD_REQUEST');
    }
    expect(calls).toEqual([]);
    // A parked job's id (or its last ECID) is released through the manager.
    const key = '3f9c2a1b0d4e5f60718293a4';
    expect((await post(`api/parked/${key}/release`)).status).toBe(200);
    expect(calls).toEqual(['POST /v1/compactions/release']);
  });

  it('monitor - a port in use is a usage error (BAD_REQUEST: the CLI exits 1) naming the port', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = busy.address() as AddressInfo;
      const server = new MonitorServer({ host: '127.0.0.1', port, reader, call, log: silentLogger() });
      servers.push(server);
      const started = server.start();
      await expect(started).rejects.toMatchObject({ code: 'BAD_REQUEST' });
      await expect(started).rejects.toThrow(new RegExp(`127\\.0\\.0\\.1:${port}.*in use.*--port`));
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  });
});
