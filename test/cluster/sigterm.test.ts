/**
 * SIGTERM always ends a process: within its grace (a compactor's time for running jobs) plus a bounded
 * shutdown (SHUTDOWN_MS, 10 s), even when everything it talks to is unreachable — paused, so that calls
 * hang rather than fail, the worst case. What it could not do (release a job, close its session) is logged,
 * and left to the cluster's own recovery (the session expiring, the tablet server seeing the link close).
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { SHUTDOWN_MS } from '../../src/lifecycle.js';
import { useCluster, useProcesses, useZooKeeper, type ManagedProcess } from '../support/index.js';

/** Generous: the bound the design guarantees, plus room for a loaded machine to schedule the exit. */
const SLACK_MS = 4_000;

function rows(prefix: string, count: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(5, '0')}`,
    ts: 1_000,
    value: 'v'.repeat(200),
  }));
}

async function exitTime(p: ManagedProcess): Promise<{ ms: number; code: number | null }> {
  const started = Date.now();
  p.signal('SIGTERM');
  const { code } = await p.waitExit(60_000);
  return { ms: Date.now() - started, code };
}

describe('SIGTERM with everything unreachable', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('a compactor in the middle of a job exits within its grace + 10 s while ZooKeeper, the manager and the tablet server are paused', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', config: { fileLimit: 2 } });
    const manager = procs.procs.find((p) => p.name === 'manager')!;
    const graceMs = 1_000;
    // Slow reads keep the job running for a long time.
    const compactor = await c.startCompactor(s.queue.name, {
      args: ['--throughput', '5000', '--grace', String(graceMs)],
    });
    for (let i = 0; i < 3; i++) await s.client.ingest('t', rows(`r${i}-`, 300));
    await compactor.waitForLog((l) => l.msg === 'compaction started', 30_000);

    zk().pause();
    manager.pause();
    s.tserver.pause();
    try {
      const { ms, code } = await exitTime(compactor);
      expect(ms).toBeLessThan(graceMs + SHUTDOWN_MS + SLACK_MS);
      expect(code).toBe(0);
      // It said what it could not do.
      expect(compactor.lines.map((l) => l.msg)).toContain('release failed; the session close will cancel it');
    } finally {
      zk().resume();
      manager.resume();
      s.tserver.resume();
    }
  });

  it('a compactor in the middle of a job exits within its grace + 10 s when the manager and the tablet server are dead and ZooKeeper is paused', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', config: { fileLimit: 2 } });
    const manager = procs.procs.find((p) => p.name === 'manager')!;
    const compactor = await c.startCompactor(s.queue.name, { args: ['--throughput', '5000'] });
    for (let i = 0; i < 3; i++) await s.client.ingest('t', rows(`r${i}-`, 300));
    await compactor.waitForLog((l) => l.msg === 'compaction started', 30_000);

    manager.kill();
    s.tserver.kill();
    zk().pause();
    try {
      const { ms, code } = await exitTime(compactor);
      expect(ms).toBeLessThan(SHUTDOWN_MS + SLACK_MS);
      expect(code).toBe(0);
      expect(compactor.lines.map((l) => l.msg)).toContain('release failed; the session close will cancel it');
    } finally {
      zk().resume();
    }
  });

  it('a manager and a tablet server exit within 10 s while ZooKeeper is paused', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', splits: ['m'] });
    await s.client.ingest('t', rows('a', 10));
    const manager = procs.procs.find((p) => p.name === 'manager')!;
    zk().pause();
    try {
      const [m, t] = await Promise.all([exitTime(manager), exitTime(s.tserver)]);
      for (const { ms, code } of [m, t]) {
        expect(ms).toBeLessThan(SHUTDOWN_MS + SLACK_MS);
        expect(code).toBe(0);
      }
    } finally {
      zk().resume();
    }
  });
});
