import { afterEach, describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import {
  ZkSession,
  createProtected,
  digestAuthFromSecret,
  type ZkLossReason,
  type ZkSessionOptions,
  type ZkWatchEvent,
} from '../../src/zk/index.js';
import { ensureLayout, ZkLayout } from '../../src/zk/layout.js';
import { expireSession, startProxy, uniqueName, useZooKeeper, type TcpProxy } from '../support/index.js';

const auth = digestAuthFromSecret('zk-layer-test-secret-0123456789');

describe('zk session', () => {
  const zk = useZooKeeper();
  const sessions: ZkSession[] = [];
  const proxies: TcpProxy[] = [];

  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((s) => s.close()));
    await Promise.all(proxies.splice(0).map((p) => p.stop()));
  });

  async function open(overrides: Partial<ZkSessionOptions> = {}): Promise<ZkSession> {
    const session = await ZkSession.connect({
      connectString: zk().connectString,
      sessionTimeoutMs: 2_000,
      auth,
      ...overrides,
    });
    sessions.push(session);
    return session;
  }

  async function viaProxy(
    overrides: Partial<ZkSessionOptions> = {},
  ): Promise<{ session: ZkSession; proxy: TcpProxy }> {
    const proxy = await startProxy(zk().port);
    proxies.push(proxy);
    const session = await open({ connectString: proxy.address, ...overrides });
    return { session, proxy };
  }

  async function root(session: ZkSession): Promise<string> {
    const path = `/${uniqueName('t')}`;
    await session.ensurePath(path);
    return path;
  }

  /** Arms a deletion watch on an existing node; resolves once the watch is in place. */
  async function watchDeletion(session: ZkSession, path: string): Promise<{ fired: Promise<ZkWatchEvent> }> {
    let fire: (event: ZkWatchEvent) => void = () => undefined;
    const fired = new Promise<ZkWatchEvent>((resolve) => (fire = resolve));
    const stat = await session.exists(path, (event) => fire(event));
    if (!stat) throw new Error(`${path} does not exist`);
    return { fired };
  }

  function lost(session: ZkSession): Promise<ZkLossReason> {
    return new Promise((resolve) => session.once('lost', resolve));
  }

  it('ephemeral node - deleted at once on clean close, and the watch fires', async () => {
    const owner = await open();
    const observer = await open();
    const base = await root(observer);
    const { path } = await createProtected(owner, base, 'c-', 'x');
    const gone = await watchDeletion(observer, path);

    const started = Date.now();
    await owner.close();
    const event = await gone.fired;

    expect(event).toEqual({ type: 'deleted', path });
    expect(await observer.exists(path)).toBeNull();
    // A clean close releases ephemerals in milliseconds, far below the 2 s session timeout.
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('ephemeral node - deleted on session expiry; the watch fires and the owner is told it is lost', async () => {
    const { session: owner, proxy } = await viaProxy();
    const observer = await open();
    const base = await root(observer);
    const { path } = await createProtected(owner, base, 'c-', 'x');
    const gone = await watchDeletion(observer, path);
    const ownerLost = lost(owner);

    proxy.blackhole();
    await expireSession(zk().connectString, owner);
    expect(await gone.fired).toEqual({ type: 'deleted', path });

    proxy.restore();
    proxy.dropConnections(); // the owner reconnects and hears that its session expired
    expect(await ownerLost).toBe('expired');
    expect(owner.state).toBe('lost');
    await expect(owner.get(path)).rejects.toMatchObject({ code: 'ZK_SESSION_LOST' });
  });

  it('protected create - a connection dropped before the answer leaves exactly one node', async () => {
    const { session, proxy } = await viaProxy();
    const base = await root(session);

    proxy.cutAfterNextClientData();
    const result = await createProtected(session, base, 'c-', 'payload');

    expect(proxy.cuts).toBe(1);
    expect(result.recoveries).toBeGreaterThanOrEqual(1);
    const children = await session.children(base);
    expect(children).toHaveLength(1);
    expect(`${base}/${children[0]}`).toBe(result.path);
    expect((await session.exists(result.path))?.ephemeralOwner).toBe(session.sessionId);
  });

  it('protected create - the same cut with a plain retry would leave two nodes (the failure it prevents)', async () => {
    const { session, proxy } = await viaProxy();
    const base = await root(session);

    proxy.cutAfterNextClientData();
    await expect(session.create(`${base}/c-`, 'payload', 'ephemeral-sequential')).rejects.toMatchObject({
      code: 'ZK_CONNECTION_LOSS',
    });
    await session.whenConnected();
    await session.create(`${base}/c-`, 'payload', 'ephemeral-sequential');

    expect(await session.children(base)).toHaveLength(2);
  });

  it('multi - a stale version fails the whole transaction and changes nothing', async () => {
    const session = await open();
    const base = await root(session);
    await session.create(`${base}/map`, 'v0');
    const { stat } = await session.get(`${base}/map`);
    await session.set(`${base}/map`, 'v1', stat.version); // now at version 1

    const attempt = session.multi([
      { op: 'set', path: `${base}/map`, data: 'v2', version: stat.version },
      { op: 'create', path: `${base}/new`, data: 'x' },
    ]);
    await expect(attempt).rejects.toMatchObject({ code: 'ZK_BAD_VERSION', details: { opIndex: 0 } });
    expect((await session.get(`${base}/map`)).data.toString()).toBe('v1');
    expect(await session.exists(`${base}/new`)).toBeNull();
  });

  it('multi - a check of version 0 is enforced (the client library would turn it into "any version")', async () => {
    const session = await open();
    const base = await root(session);
    await session.create(`${base}/node`, 'a');
    await session.set(`${base}/node`, 'b', 0); // version 1

    await expect(
      session.multi([
        { op: 'check', path: `${base}/node`, version: 0 },
        { op: 'create', path: `${base}/child`, data: '' },
      ]),
    ).rejects.toMatchObject({ code: 'ZK_BAD_VERSION' });
    expect(await session.exists(`${base}/child`)).toBeNull();

    await session.multi([
      { op: 'check', path: `${base}/node`, version: 1 },
      { op: 'create', path: `${base}/child`, data: '' },
    ]);
    expect(await session.exists(`${base}/child`)).not.toBeNull();
  });

  it('acl - nodes of the instance cannot be read or changed without its secret', async () => {
    const session = await open();
    const base = await root(session);
    await session.create(`${base}/guarded`, 'secret data');

    const stranger = await open({ auth: digestAuthFromSecret('some-other-secret-0123456789') });
    await expect(stranger.get(`${base}/guarded`)).rejects.toMatchObject({ code: 'ZK_NO_AUTH' });
    await expect(stranger.set(`${base}/guarded`, 'x')).rejects.toMatchObject({ code: 'ZK_NO_AUTH' });
    await expect(stranger.delete(`${base}/guarded`)).rejects.toMatchObject({ code: 'ZK_NO_AUTH' });
    const anonymous = await open({ auth: undefined });
    await expect(anonymous.get(`${base}/guarded`)).rejects.toMatchObject({ code: 'ZK_NO_AUTH' });
    expect((await session.get(`${base}/guarded`)).data.toString()).toBe('secret data');
  });

  it('acl - an instance root made beforehand without the instance ACL is refused, naming it', async () => {
    // Made by hand (zkCli `create`, no credentials): the world may create and delete under it.
    const anonymous = await open({ auth: undefined });
    const open1 = `/${uniqueName('layout')}`;
    await anonymous.create(open1, '');
    const refused = ensureLayout(await open(), new ZkLayout(open1));
    await expect(refused).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(refused).rejects.toThrow(`ZooKeeper node ${open1} exists without this instance's ACL`);
    const session = await open();
    // Made by the instance itself: fine, and again on every start.
    const own = new ZkLayout(`/${uniqueName('layout')}`);
    await ensureLayout(session, own);
    await ensureLayout(await open(), own);
    expect(await session.hasOwnAcl(own.queues)).toBe(true);
  });

  it('suspended - a connection that stays down for a session timeout is declared lost', async () => {
    const { session, proxy } = await viaProxy();
    const suspended = new Promise<void>((resolve) => session.once('suspended', resolve));
    const reason = lost(session);

    proxy.refuse(true);
    proxy.dropConnections();
    await suspended;
    expect(session.state).toBe('suspended');
    const started = Date.now();
    expect(await reason).toBe('suspended-too-long');
    expect(Date.now() - started).toBeLessThan(session.sessionTimeoutMs + 2_000);
  });

  it('suspended - a short disconnection within the timeout resumes the same session', async () => {
    const { session, proxy } = await viaProxy();
    const base = await root(session);
    const { path } = await createProtected(session, base, 'c-', 'x');
    const reconnected = new Promise<void>((resolve) => session.once('reconnected', resolve));

    proxy.dropConnections();
    await reconnected;

    expect(session.state).toBe('connected');
    expect((await session.exists(path))?.ephemeralOwner).toBe(session.sessionId);
  });

  it('suspended - a call made while disconnected is answered once reconnected, with the credentials (found by the chaos run: NO_AUTH)', async () => {
    const { session, proxy } = await viaProxy();
    const base = await root(session);
    await session.create(`${base}/guarded`, 'secret data'); // readable with the instance digest only
    const suspended = new Promise<void>((resolve) => session.once('suspended', resolve));
    proxy.refuse(true);
    proxy.dropConnections();
    await suspended;
    // Sent now, the client would queue it ahead of the credentials it sends again on reconnecting.
    const read = session.get(`${base}/guarded`);
    await new Promise((r) => setTimeout(r, 300));
    proxy.refuse(false);
    expect((await read).data.toString()).toBe('secret data');
    expect(session.state).toBe('connected');
  });

  it('calls - time out instead of hanging when the server stops answering', async () => {
    const { session, proxy } = await viaProxy({ requestTimeoutMs: 300, watchdog: false });
    proxy.blackhole();
    const started = Date.now();
    await expect(session.get('/')).rejects.toMatchObject({ code: 'ZK_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('session - calls after a loss fail at once with ZK_SESSION_LOST', async () => {
    const { session, proxy } = await viaProxy();
    const reason = lost(session);
    proxy.blackhole();
    await expireSession(zk().connectString, session);
    proxy.restore();
    proxy.dropConnections();
    await reason;
    const err = await session.exists('/').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExcError);
    expect((err as ExcError).code).toBe('ZK_SESSION_LOST');
  });
});

describe('zk watchdog', () => {
  // A server of its own: this suite freezes it.
  const zk = useZooKeeper();

  it('finds a server paused (SIGSTOP) with the connection open, and declares the session lost once no server answers for the timeout', async () => {
    const session = await ZkSession.connect({
      connectString: zk().connectString,
      sessionTimeoutMs: 1_500,
      auth,
    });
    try {
      const reason = new Promise<ZkLossReason>((resolve) => session.once('lost', resolve));
      const suspended = new Promise<void>((resolve) => session.once('suspended', resolve));
      zk().pause();
      const started = Date.now();
      try {
        // The TCP connection stays open, so only the watchdog can notice: it drops the connection, and with
        // no other server to go to, the session is lost a timeout after the server last answered.
        await suspended;
        expect(await reason).toBe('suspended-too-long');
        expect(Date.now() - started).toBeLessThan(session.sessionTimeoutMs + 1_000);
      } finally {
        zk().resume();
      }
    } finally {
      await session.close();
    }
  });
});
