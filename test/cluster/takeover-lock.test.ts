/**
 * Found by the chaos run: the active manager paused (SIGSTOP) in the middle of a write keeps SQLite's
 * write lock on the shared metadata store until it resumes. The standby that wins the election must wait
 * for the lock — not exit and leave the cluster without a manager — and take over once it is free.
 *
 * A paused process holding the lock is played by a connection of the test that holds a write transaction
 * open (pausing the manager at exactly that moment is not something a test can arrange).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { TableInfo } from '../../src/meta/views.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

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
});
