/**
 * A ZooKeeper leader election cancels nothing. Against a real three-server ensemble, with compactions
 * running throughout (slow compactors hold their reservations across every fault): the leader killed and
 * restarted, a follower killed and restarted, and the whole ensemble frozen for less than the session
 * timeout. No reservation is cancelled, no process's session expires, no process stops; afterwards every
 * job commits and the data is exact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../support/ensemble.js';
import {
  DataModel,
  allTablets,
  scanLines,
  useCluster,
  useProcesses,
  waitFor,
  type LogLine,
  type ManagedProcess,
  type TestZooKeeper,
} from '../support/index.js';

const SESSION_MS = 6_000;

let clock = 1_000;
function batch(prefix: string, rows: number): ClientEntry[] {
  const ts = clock++;
  return Array.from({ length: rows }, (_, i) => ({
    row: `${prefix}${String(i).padStart(4, '0')}`,
    ts,
    value: `v${ts}`,
  }));
}

describe('zookeeper leader election', () => {
  let ensemble: ZooKeeperEnsemble | undefined;
  beforeAll(async () => {
    ensemble = await startZooKeeperEnsemble();
  });
  afterAll(async () => {
    await ensemble?.stop();
  });
  // The cluster harness needs only the connect string of its ZooKeeper.
  const zk = (): TestZooKeeper => {
    const e = ensemble!;
    return {
      connectString: e.connectString,
      port: e.members[0]!.clientPort,
      pid: e.members[0]!.pid,
      dataDir: e.members[0]!.dataDir,
      logFile: e.members[0]!.logFile,
      fourLetter: (word: string) => e.fourLetter(e.members[0]!.id, word),
      stop: () => e.stop(),
      pause: () => undefined,
      resume: () => undefined,
    };
  };
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: SESSION_MS });

  it('leader killed, follower killed, ensemble frozen: no reservation cancelled, no session expired, no process stopped', async () => {
    const e = ensemble!;
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['b', 'c'] });
    const standby = await c.startManager({ name: 'manager-2', standby: true });
    const model = new DataModel();
    const write = async (entries: ClientEntry[]): Promise<void> => {
      model.write(entries);
      await s.client.ingest('TABLE1', entries);
    };
    // Three jobs, one per tablet, taken by slow compactors that hold them across the faults.
    const compactors: ManagedProcess[] = [];
    for (let i = 0; i < 3; i++)
      compactors.push(await c.startCompactor('q', { name: `slow-${i}`, args: ['--throughput', '2000'] }));
    for (const prefix of ['a', 'b', 'c']) for (let i = 0; i < 3; i++) await write(batch(prefix, 200));
    const started = await Promise.all(
      compactors.map((p) => p.waitForLog((l) => l.msg === 'compaction started', 20_000)),
    );
    const all = [...procs.procs];

    const quorum = await e.waitForQuorum();
    await e.kill(quorum.leader);
    await e.waitForQuorum(15_000);
    await write(batch('a', 5)); // the cluster works under the new leader
    await e.restart(quorum.leader);

    const next = await e.waitForQuorum();
    const follower = next.followers[0]!;
    await e.kill(follower);
    await write(batch('b', 5));
    await e.restart(follower);

    // Unreachable for a third of the session timeout: every client is cut off, none may lose its session.
    await e.waitForQuorum();
    // Each job is still reserved (held through the faults), or committed already on a machine slow
    // enough for the faults to outlast it — never cancelled. At least one is held through the freeze.
    const reserved = new Set((await allTablets(s.meta)).flatMap((t) => [...t.reservations.keys()]));
    const held = started.filter((l) => reserved.has(l.ecid as string)).length;
    const committed = compactors.filter((p, i) =>
      p.lines.some((l) => l.msg === 'compaction committed' && l.ecid === started[i]!.ecid),
    ).length;
    expect(held + committed, 'reservations held through the faults, or committed').toBe(3);
    expect(held, 'reservations held into the freeze').toBeGreaterThan(0);
    for (const m of e.members) e.pause(m.id);
    await new Promise((r) => setTimeout(r, SESSION_MS / 3));
    for (const m of e.members) e.resume(m.id);
    await e.waitForQuorum(15_000);
    await write(batch('c', 5));

    // Every job started before the faults commits under its first reservation.
    for (const [i, p] of compactors.entries()) {
      await p.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === started[i]!.ecid, 60_000);
    }
    const lines = (p: ManagedProcess): LogLine[] => p.lines;
    const cancels = all.flatMap((p) => lines(p).filter((l) => l.msg === 'reservation cancelled'));
    expect(cancels, 'reservations cancelled').toEqual([]);
    const lost = all.flatMap((p) =>
      lines(p).filter(
        (l) => l.msg === 'zookeeper session lost' || (typeof l.to === 'string' && l.to === 'expired'),
      ),
    );
    expect(lost, 'sessions lost').toEqual([]);
    expect(
      all.filter((p) => !p.running).map((p) => p.name),
      'processes stopped',
    ).toEqual([]);
    expect(standby.lines.some((l) => l.msg === 'manager active')).toBe(false);

    await waitFor(async () => (await s.client.tablets('TABLE1')).every((t) => t.loc), 'tablets hosted');
    expect(await scanLines(s.client, 'TABLE1')).toEqual(model.expected());
  });
});
