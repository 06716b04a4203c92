/**
 * MetaClient.mutate against a real manager: the mutations of callers in the same turn of the event loop
 * go as one request, yet each caller's are applied or rejected on their own — a caller's invalid
 * mutation fails that caller alone, and no grouped request is larger than the route takes (its
 * mutation count, the RPC body limit). And a client that owns its ZooKeeper session (the CLI) goes on
 * with a new one when it is lost.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { MetaClient } from '../../src/meta/client.js';
import type { Mutation } from '../../src/meta/types.js';
import { ZkSession, digestAuthFromSecret } from '../../src/zk/index.js';
import {
  expireSession,
  startProxy,
  useCluster,
  useProcesses,
  useZooKeeper,
  type TcpProxy,
} from '../support/index.js';

async function outcome(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => value,
    (err: unknown) => ({ code: (err as ExcError).code, message: (err as ExcError).message }),
  );
}

describe('meta client', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  async function start(): Promise<MetaClient> {
    await cluster().startManager();
    return cluster().meta();
  }

  async function cellCount(meta: MetaClient, prefix: string): Promise<number> {
    let n = 0;
    for await (const _ of meta.scanAll({ prefix })) n++;
    return n;
  }

  it('mutate - a caller’s invalid mutation fails that caller alone; the callers grouped with it are applied', async () => {
    const meta = await start();
    const invalid: [Mutation, RegExp][] = [
      [{ puts: [{ row: 'bad', col: 'c', value: 'x\u0000' }] }, /mutations\.1\.puts\.0\.value: .*NUL/],
      [
        { puts: [{ row: 'bad', col: 'c', value: 'x'.repeat((1 << 20) + 1) }] },
        /mutations\.1\.puts\.0\.value/,
      ],
      [{ puts: [{ row: 'bad\u0001', col: 'c', value: 'v' }] }, /mutations\.1\.puts\.0\.row: .*printable/],
      [{ deleteRows: ['~instance'] }, /mutations\.1\.deleteRows\.0: .*~instance.*reserved/],
    ];
    for (const [i, [bad, message]] of invalid.entries()) {
      const [before, rejected, after] = await Promise.all([
        outcome(meta.mutate([{ puts: [{ row: `ok-${i}`, col: 'before', value: 'v' }] }])),
        outcome(meta.mutate([{ puts: [{ row: `ok-${i}`, col: 'mine', value: 'v' }] }, bad])),
        outcome(meta.mutate([{ puts: [{ row: `ok-${i}`, col: 'after', value: 'v' }] }])),
      ]);
      expect(before, `case ${i}`).toEqual([{ applied: true }]);
      expect(after, `case ${i}`).toEqual([{ applied: true }]);
      expect(rejected, `case ${i}`).toMatchObject({ code: 'BAD_REQUEST' });
      expect((rejected as { message: string }).message).toMatch(message);
      // The invalid caller's valid mutation was not applied either: a caller's mutations go together.
      expect([...(await meta.row(`ok-${i}`)).keys()]).toEqual(['after', 'before']);
    }
    expect(await cellCount(meta, 'bad')).toBe(0);
  });

  it('mutate - grouped callers never make a request over the body limit or the route’s 10,000 mutations', async () => {
    const meta = await start();
    // 20 callers of about 1 MB each: 20 MB in one request is over the 16 MiB body limit.
    const big = 'x'.repeat(1_000_000);
    const large = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        meta.mutate([{ puts: [{ row: `big-${i}`, col: 'c', value: big }] }]),
      ),
    );
    expect(large).toEqual(Array.from({ length: 20 }, () => [{ applied: true }]));
    expect(await cellCount(meta, 'big-')).toBe(20);

    // 1,000 mutations, then 9,500: together 10,500, over the route's 10,000.
    const puts = (prefix: string, n: number): Mutation[] =>
      Array.from({ length: n }, (_, i) => ({ puts: [{ row: `${prefix}${i}`, col: 'c', value: 'v' }] }));
    const [first, second] = await Promise.all([
      meta.mutate(puts('m-a', 1_000)),
      meta.mutate(puts('m-b', 9_500)),
    ]);
    expect(first.filter((r) => r.applied)).toHaveLength(1_000);
    expect(second.filter((r) => r.applied)).toHaveLength(9_500);

    // One caller alone over the route's limit gets a clear error before anything is sent.
    const over = await outcome(meta.mutate(puts('m-c', 10_001)));
    expect(over).toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/mutations/) as unknown,
    });
    expect(await cellCount(meta, 'm-c')).toBe(0);
  });

  describe('session lost', () => {
    const opened: ZkSession[] = [];
    const proxies: TcpProxy[] = [];
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close().catch(() => undefined);
      for (const p of proxies.splice(0)) await p.stop();
    });

    /** A session through a proxy (to cut it off and expire it), and a MetaClient on it. */
    async function client(withReconnect: boolean) {
      const c = cluster();
      const proxy = await startProxy(zk().port);
      proxies.push(proxy);
      const open = async (connectString: string) => {
        const s = await ZkSession.connect({
          connectString,
          sessionTimeoutMs: 4_000,
          auth: digestAuthFromSecret(c.secret),
        });
        opened.push(s);
        return s;
      };
      const session = await open(proxy.address);
      const meta = new MetaClient({
        session,
        layout: c.layout,
        secret: c.secret,
        logger: silentLogger(),
        timeoutMs: 5_000,
        failoverMs: 20_000,
        ...(withReconnect ? { reconnect: () => open(zk().connectString) } : {}),
      });
      const expire = async () => {
        proxy.blackhole();
        await expireSession(zk().connectString, session);
        proxy.restore();
        proxy.dropConnections(); // it reconnects and hears that its session expired
        await new Promise<void>((resolve) =>
          session.state === 'lost' ? resolve() : session.once('lost', () => resolve()),
        );
      };
      return { meta, expire };
    }

    it('session - a client with reconnect finds the next manager on a new session; one without fails ZK_SESSION_LOST', async () => {
      const c = cluster();
      const first = await c.startManager({ name: 'manager-1' });
      const renewing = await client(true);
      const fixed = await client(false);
      for (const { meta } of [renewing, fixed]) await meta.call('GET', '/v1/tables');
      await renewing.expire();
      await fixed.expire();
      // The manager the clients knew is gone: finding the next one needs ZooKeeper.
      first.kill();
      await c.startManager({ name: 'manager-2' });

      const tables = await renewing.meta.call<{ tables: unknown[] }>('GET', '/v1/tables');
      expect(Array.isArray(tables.tables)).toBe(true);
      await expect(fixed.meta.call('GET', '/v1/tables')).rejects.toMatchObject({ code: 'ZK_SESSION_LOST' });
      renewing.meta.close();
      fixed.meta.close();
    });
  });
});
