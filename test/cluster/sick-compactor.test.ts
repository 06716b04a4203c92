/**
 * A sick compactor does not park healthy jobs (issue 44; DESIGN.md, "Sick compactors"), with real
 * processes and a real S3-compatible server: one compactor reaches the store through a proxy that refuses
 * every write, so every job it takes fails. It backs off after each failure, and after
 * EXC_COMPACTOR_EXIT_AFTER failures in a row it exits with code 5; its failures, all on one compactor of
 * two, park nothing, and the healthy compactor compacts every tablet.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { isParked } from '../../src/meta/tablet.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { useS3 } from '../support/s3.js';
import { readTablet, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

function rows(prefix: string, count: number, ts: number): ClientEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    row: `${prefix}${String(i).padStart(4, '0')}`,
    ts,
    value: `v${ts}-${'x'.repeat(40)}-${i}`,
  }));
}

describe('sick compactors', () => {
  const zk = useZooKeeper();
  const s3 = useS3();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 6_000, env: () => s3().env });

  it('a compactor whose writes all fail backs off, exits with code 5 and parks no job', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['b', 'c', 'd'] });
    // Three files in each of the four tablets: a job each.
    for (const ts of [1, 2, 3])
      for (const p of ['a', 'b~', 'c~', 'd~']) await s.client.ingest(s.table, rows(p, 2_000, ts));
    const proxy = await FaultProxy.start(Number(new URL(s3().endpoint).port));
    try {
      proxy.inject({ kind: 'status', status: 403, code: 'AccessDenied' }, { times: Infinity, method: 'PUT' });
      // The healthy one first, slowed down so the sick one finds jobs to fail.
      const healthy = await c.startCompactor('q', { name: 'healthy', args: ['--throughput', '150000'] });
      await healthy.waitForLog((l) => l.msg === 'compaction started', 30_000);
      const sick = await c.startCompactor('q', {
        name: 'sick',
        env: {
          EXC_S3_ENDPOINT: `http://127.0.0.1:${proxy.port}`,
          EXC_COMPACTOR_BACKOFF_MS: '500',
          EXC_COMPACTOR_EXIT_AFTER: '4',
        },
      });
      // Three failures in a row: it says it is unhealthy while it waits 2 s before the fourth job.
      await sick.waitForLog((l) => l.msg === 'job failed: waiting before the next' && l.streak === 3, 60_000);
      const health = await fetch(`${sick.status}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ healthy: false, failureStreak: 3 });
      const { code } = await sick.exit;
      expect(code).toBe(5);
      const failed = sick.lines.filter((l) => l.msg === 'compaction failed');
      expect(failed).toHaveLength(4);
      // It waited longer after each failure: 0.5, 1 and 2 s.
      expect(
        sick.lines.filter((l) => l.msg === 'job failed: waiting before the next').map((l) => l.waitMs),
      ).toEqual([500, 1_000, 2_000]);
      expect(
        sick.lines.some((l) => l.msg === '4 jobs failed in a row: this compactor is sick, stopping'),
      ).toBe(true);

      // Its failures are recorded against the jobs, naming it, and park none of them.
      const failures = [];
      for (const t of s.tablets) failures.push(...(await readTablet(s.meta, t.tablet)).failures.values());
      expect(failures.length).toBeGreaterThan(0);
      for (const f of failures) {
        expect(f.failedOn).toEqual([sick.compactor]);
        expect(f.lone).toBe(false);
        expect(isParked(f, 3)).toBe(false);
      }
      // The healthy compactor does every job; nothing was ever parked.
      await waitFor(
        async () => {
          for (const t of s.tablets) if ((await readTablet(s.meta, t.tablet)).files.size !== 1) return false;
          return true;
        },
        'every tablet compacted to one file',
        90_000,
      );
      for (const t of s.tablets)
        for (const f of (await readTablet(s.meta, t.tablet)).failures.values()) expect(f.parked).toBe(false);
    } finally {
      await proxy.stop();
    }
  }, 150_000);
});
