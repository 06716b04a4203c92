/**
 * The tablet server's reconciler: the sweep of reservations (what cancels a dead compactor's work when
 * its watch missed the death) runs on its own every interval, not only at the end of a round, which can
 * wait long on one tablet (its mutex, a call to the manager riding a failover); and it re-reads only the
 * rows the change feed names, all of them (paced, a group at a time) when the feed cannot say.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import type { CompactorWatch } from '../../src/tserver/compactor-watch.js';
import type { Hosting } from '../../src/tserver/hosting.js';
import { Reconciler } from '../../src/tserver/reconciler.js';

describe('reconciler', () => {
  it('a round stuck on a tablet does not hold the sweep back (found by a review)', async () => {
    const swept: string[][] = [];
    const tablet = {
      row: '0001<',
      state: 'hosted',
      stale: true,
      replanNeeded: false,
      meta: { reservations: new Map([['E1', { compactor: '/c/dead' }]]) },
    };
    const hosting = {
      retryUnsettledLoads: async () => undefined,
      all: () => [tablet],
      // A read-back stuck behind a manager failover: never ends within the test.
      replan: () => new Promise<void>(() => undefined),
      refresh: () => new Promise<void>(() => undefined),
    } as unknown as Hosting;
    const watch = {
      sweep: async (reservations: [string, unknown][]) => {
        swept.push(reservations.map(([c]) => c));
      },
    } as unknown as CompactorWatch;
    const reconciler = new Reconciler(hosting, watch, silentLogger(), { everyMs: 20 });
    reconciler.start();
    try {
      await expect.poll(() => swept.length, { timeout: 2_000 }).toBeGreaterThanOrEqual(2);
      expect(swept[0]).toEqual(['/c/dead']);
    } finally {
      reconciler.stop();
    }
  });

  it('refreshes the hosted rows others changed, and after a reset every row, a bounded number a round', async () => {
    const hosted = Array.from({ length: 7 }, (_, i) => `t${i}`);
    const refreshed: string[] = [];
    /** The round each refresh was made in (rounds ask the feed once each). */
    const roundOf: number[] = [];
    let asked = 0;
    const hosting = {
      retryUnsettledLoads: async () => undefined,
      all: () => [],
      has: (row: string) => hosted.includes(row),
      rows: () => hosted,
      refresh: async (row: string) => {
        refreshed.push(row);
        roundOf.push(asked);
      },
    } as unknown as Hosting;
    const watch = { sweep: async () => undefined } as unknown as CompactorWatch;
    const answers = [
      { reset: false, rows: ['t1', 'elsewhere', 't4'] },
      { reset: false, rows: [] },
      { reset: true, rows: [] },
    ];
    const reconciler = new Reconciler(hosting, watch, silentLogger(), {
      everyMs: 10,
      refreshPerRound: 3,
      changes: async () => {
        const answer = answers[asked++];
        if (!answer) throw new Error('the manager is away');
        return answer;
      },
    });
    reconciler.start();
    try {
      // Rounds 1 and 2 read t1 and t4 only; round 3's reset makes all seven due, read 3 a round.
      await expect.poll(() => refreshed.length, { timeout: 2_000 }).toBe(9);
      expect(refreshed.slice(0, 2)).toEqual(['t1', 't4']);
      expect(refreshed.slice(2).sort()).toEqual(hosted);
      expect(roundOf).toEqual([1, 1, 3, 3, 3, 4, 4, 4, 5]);
      expect(reconciler.stats.resets).toBe(1);
      // A feed that cannot answer reads nothing more.
      await new Promise((r) => setTimeout(r, 100));
      expect(refreshed.length).toBe(9);
    } finally {
      reconciler.stop();
    }
  });

  it('refreshes the rows of a round a hundred at a time, so their reads go to the manager together', async () => {
    const hosted = Array.from({ length: 250 }, (_, i) => `t${i}`);
    let inFlight = 0;
    let mostAtOnce = 0;
    const hosting = {
      retryUnsettledLoads: async () => undefined,
      all: () => [],
      has: () => true,
      rows: () => hosted,
      refresh: async () => {
        mostAtOnce = Math.max(mostAtOnce, ++inFlight);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
      },
    } as unknown as Hosting;
    const watch = { sweep: async () => undefined } as unknown as CompactorWatch;
    const reconciler = new Reconciler(hosting, watch, silentLogger(), {
      refreshPerRound: 250,
      changes: async () => ({ reset: true, rows: [] }),
    });
    await reconciler.runRound();
    expect(reconciler.stats.refreshed).toBe(250);
    // Every refresh of a group under way at once, and never more than a group: 100, 100, then 50.
    expect(mostAtOnce).toBe(100);
  });
});
