/**
 * The tablet server's reconciler: the sweep of reservations (what cancels a dead compactor's work when
 * its watch missed the death) runs on its own every interval, not only at the end of a round, which can
 * wait long on one tablet (its mutex, a call to the manager riding a failover).
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
});
