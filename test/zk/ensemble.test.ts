import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZkSession, type ZkLossReason } from '../../src/zk/index.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../support/ensemble.js';
import { uniqueName } from '../support/tmp.js';
import { waitFor } from '../support/waits.js';

const SESSION_TIMEOUT_MS = 4_000;

describe('zookeeper ensemble', () => {
  let ensemble: ZooKeeperEnsemble | undefined;
  const sessions: ZkSession[] = [];
  /** Every session state change, per session, so a failure shows what the client went through. */
  const history = new Map<ZkSession, string[]>();
  const losses: ZkLossReason[] = [];

  beforeAll(async () => {
    ensemble = await startZooKeeperEnsemble();
  });

  afterAll(async () => {
    try {
      await Promise.all(sessions.map((s) => s.close()));
    } finally {
      await ensemble?.stop();
    }
  });

  function zk(): ZooKeeperEnsemble {
    if (!ensemble) throw new Error('the ensemble did not start');
    return ensemble;
  }

  async function open(connectString = zk().connectString): Promise<ZkSession> {
    const session = await ZkSession.connect({ connectString, sessionTimeoutMs: SESSION_TIMEOUT_MS });
    sessions.push(session);
    const seen: string[] = [];
    history.set(session, seen);
    for (const event of ['suspended', 'reconnected'] as const) session.on(event, () => seen.push(event));
    session.on('lost', (reason) => {
      seen.push(`lost:${reason}`);
      losses.push(reason);
    });
    return session;
  }

  /** The member that holds the session's connection, from the `cons` four-letter word. */
  async function memberHolding(session: ZkSession): Promise<number | undefined> {
    const id = BigInt(`0x${session.sessionId}`);
    for (const m of zk().members) {
      if (m.state !== 'running') continue;
      const cons = await zk()
        .fourLetter(m.id, 'cons')
        .catch(() => '');
      const ids = [...cons.matchAll(/sid=0x([0-9a-f]+)/g)].map((match) => BigInt(`0x${match[1]}`));
      if (ids.includes(id)) return m.id;
    }
    return undefined;
  }

  /**
   * Waits until the client has noticed it was cut off and has connected again. Right after a kill the
   * client may not have seen the socket close yet: a request sent then would fail with CONNECTION_LOSS.
   */
  async function reconnected(session: ZkSession): Promise<void> {
    await waitFor(
      async () => history.get(session)?.includes('suspended'),
      'the session to be cut off',
      10_000,
    );
    await session.whenConnected();
  }

  it('leader killed - a new leader is elected; the session, its ephemeral node and writes survive', async () => {
    const session = await open();
    const root = `/${uniqueName('ens')}`;
    await session.ensurePath(root);
    const ephemeral = await session.create(`${root}/mine`, 'before', 'ephemeral');
    const before = await zk().waitForQuorum();

    const killedAt = Date.now();
    await zk().kill(before.leader);
    const after = await zk().waitForQuorum(15_000);
    const electionMs = Date.now() - killedAt;
    await reconnected(session);

    expect(after.leader).not.toBe(before.leader);
    expect(after.followers).toHaveLength(1);
    // Every client is cut off while there is no leader (followers drop their connections too), so the
    // election must end well within the session timeout for sessions to survive. It takes about 0.6 s.
    expect(electionMs).toBeLessThan(SESSION_TIMEOUT_MS);
    await session.set(ephemeral, 'after');
    await session.create(`${root}/written-after-election`);
    expect(losses).toEqual([]);
    expect(session.state).toBe('connected');
    expect((await session.exists(ephemeral))?.ephemeralOwner).toBe(session.sessionId);
    const observer = await open();
    expect((await observer.get(ephemeral)).data.toString()).toBe('after');

    // The killed member comes back as a follower of the new leader, with everything written meanwhile.
    expect(await zk().restart(before.leader)).toBe('follower');
    expect(await zk().leader()).toBe(after.leader);
    const restarted = zk().members.find((m) => m.id === before.leader)!;
    const direct = await open(`127.0.0.1:${restarted.clientPort}`);
    expect((await direct.get(ephemeral)).data.toString()).toBe('after');
    expect(await direct.exists(`${root}/written-after-election`)).not.toBeNull();
    expect(losses).toEqual([]);
    // `direct` knows only one member, which the next test may kill.
    await Promise.all([direct.close(), observer.close()]);
  });

  it('follower killed - the session moves to another member and stays up', async () => {
    const quorum = await zk().waitForQuorum();
    // The client picks a member at random: reopen until it sits on a follower, so killing that follower
    // really takes the session's connection away.
    let session = await open();
    let holder = await memberHolding(session);
    for (let i = 0; i < 10 && !(holder !== undefined && quorum.followers.includes(holder)); i++) {
      await session.close();
      session = await open();
      holder = await memberHolding(session);
    }
    expect(quorum.followers).toContain(holder);
    const root = `/${uniqueName('ens')}`;
    await session.ensurePath(root);
    const ephemeral = await session.create(`${root}/mine`, 'before', 'ephemeral');

    await zk().kill(holder!);
    await reconnected(session);
    await session.set(ephemeral, 'after');

    expect(history.get(session)).toEqual(['suspended', 'reconnected']);
    expect(losses).toEqual([]);
    expect([quorum.leader, ...quorum.followers.filter((id) => id !== holder)]).toContain(
      await memberHolding(session),
    );
    expect((await session.exists(ephemeral))?.ephemeralOwner).toBe(session.sessionId);
    expect(await zk().waitForQuorum()).toEqual({
      leader: quorum.leader,
      followers: quorum.followers.filter((id) => id !== holder),
    });
  });

  it('member paused under the session - the watchdog moves it to another member; nothing is lost', async () => {
    for (const m of zk().members) if (m.state === 'down') await zk().restart(m.id);
    const quorum = await zk().waitForQuorum();
    let session = await open();
    let holder = await memberHolding(session);
    for (let i = 0; i < 10 && !(holder !== undefined && quorum.followers.includes(holder)); i++) {
      await session.close();
      session = await open();
      holder = await memberHolding(session);
    }
    expect(quorum.followers).toContain(holder);
    const root = `/${uniqueName('ens')}`;
    await session.ensurePath(root);
    const ephemeral = await session.create(`${root}/mine`, 'before', 'ephemeral');

    // A paused server keeps the TCP connection open and answers nothing: only the watchdog can tell.
    zk().pause(holder!);
    try {
      await reconnected(session);
      await session.set(ephemeral, 'after');
      expect(history.get(session)).toEqual(['suspended', 'reconnected']);
      expect(losses).toEqual([]);
      expect((await session.exists(ephemeral))?.ephemeralOwner).toBe(session.sessionId);
    } finally {
      zk().resume(holder!);
    }
  });

  it('stop - ends every JVM, a paused one too, and is safe to call twice', async () => {
    const running = zk().members.filter((m) => m.state === 'running');
    const pids = running.map((m) => m.pid);
    expect(pids.every((pid) => pid > 0)).toBe(true);
    await Promise.all(sessions.splice(0).map((s) => s.close()));
    zk().pause(running[0]!.id);

    await zk().stop();
    await zk().stop();

    const alive = pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    expect(alive).toEqual([]);
    expect(zk().members.map((m) => m.state)).toEqual(['down', 'down', 'down']);
  });
});
