/**
 * Found by the chaos run: the active manager paused (SIGSTOP) in the middle of a write keeps SQLite's
 * write lock on the shared metadata store until it resumes. The standby that wins the election must wait
 * for the lock — not exit and leave the cluster without a manager — and take over once it is free. A
 * standby that loses its ZooKeeper session while it waits stops waiting: taking the store over later
 * would fence the successor that won the election meanwhile.
 *
 * A paused process holding the lock is played by a connection of the test that holds a write transaction
 * open (pausing the manager at exactly that moment is not something a test can arrange).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { TableInfo } from '../../src/meta/views.js';
import { startProxy, useCluster, useProcesses, useZooKeeper } from '../support/index.js';

describe('manager takeover', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('takeover - the standby waits for the store lock a frozen manager holds, then serves; no exit', async () => {
    const first = await cluster().startManager({ name: 'manager-1' });
    const second = await cluster().startManager({ name: 'manager-2', standby: true });
    const meta = await cluster().meta();
    await meta.call('POST', '/v1/tables', { name: 'orders', splits: ['g'] });

    const frozen = new Database(join(cluster().dataDir, 'manager', 'metadata.sqlite'));
    frozen.exec('BEGIN IMMEDIATE');
    first.kill();
    // The standby wins the election and finds the lock taken: it waits, saying why, and stays up.
    await second.waitForLog(
      (l) => l.msg === 'waiting for the metadata store (another process holds its lock)',
      cluster().sessionTimeoutMs + 15_000,
    );
    await new Promise((r) => setTimeout(r, 6_000)); // longer than SQLite's busy timeout (5 s)
    expect(second.running).toBe(true);
    expect(second.lines.some((l) => l.msg === 'manager active')).toBe(false);

    frozen.exec('COMMIT');
    frozen.close();
    await second.waitForLog((l) => l.msg === 'manager active', 10_000);
    const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
    expect(tables.map((t) => t.name)).toEqual(['orders']);
  });

  it('takeover - a manager that loses its session while it waits for the lock stops waiting: it never fences its successor', async () => {
    const c = cluster();
    const first = await c.startManager({ name: 'manager-1' });
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 'orders' });
    const proxy = await startProxy(zk().port);
    try {
      const cut = await c.startManager({ name: 'manager-2', standby: true, env: { EXC_ZK: proxy.address } });
      const frozen = new Database(join(c.dataDir, 'manager', 'metadata.sqlite'));
      frozen.exec('BEGIN IMMEDIATE');
      first.kill();
      await cut.waitForLog(
        (l) => l.msg === 'waiting for the metadata store (another process holds its lock)',
        c.sessionTimeoutMs + 15_000,
      );
      // Its session is lost while it waits; the standby wins the election and waits for the lock too.
      const successor = await c.startManager({ name: 'manager-3', standby: true });
      proxy.blackhole();
      await cut.waitForLog(
        (l) => l.msg === 'manager state' && l.to === 'expired',
        c.sessionTimeoutMs + 10_000,
      );
      const lostAt = Date.now();
      await successor.waitForLog(
        (l) => l.msg === 'waiting for the metadata store (another process holds its lock)',
        c.sessionTimeoutMs + 15_000,
      );
      // An attempt already waiting on SQLite's busy timeout (5 s) when the session was lost may still end;
      // none may start after it.
      await new Promise((r) => setTimeout(r, Math.max(0, lostAt + 6_000 - Date.now())));
      frozen.exec('COMMIT');
      frozen.close();
      await successor.waitForLog((l) => l.msg === 'manager active', 10_000);
      await new Promise((r) => setTimeout(r, 4_000)); // the old loop tried again within a second
      expect(cut.lines.filter((l) => l.msg === 'metadata store taken over')).toEqual([]);
      expect(successor.lines.some((l) => /fenced/.test(`${String(l.msg)} ${String(l.cause)}`))).toBe(false);
      const status = await meta.call<{ state: string; epoch: number; url: string }>('GET', '/v1/status');
      expect(status).toMatchObject({ state: 'active', epoch: 2 });

      // Back in touch, the cut-off manager rejoins as a standby.
      proxy.restore();
      proxy.dropConnections();
      await cut.waitForLog(
        (l) => l.msg === 'manager state' && l.from === 'rejoining' && l.to === 'standby',
        c.sessionTimeoutMs + 20_000,
      );
    } finally {
      await proxy.stop();
    }
  });
});
