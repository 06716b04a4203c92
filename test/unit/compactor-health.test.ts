/**
 * A compactor's failure streak (src/compactor/health.ts): the wait after each failed job doubles up to
 * its cap, the compactor turns unhealthy after `sickAfter` failures in a row and is told to exit after
 * `exitAfter`; a commit ends the streak. Real compactors that cannot write exit in
 * test/compactor/sick-compactor.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Health } from '../../src/compactor/health.js';

describe('compactor health', () => {
  it('backs off exponentially to a cap, turns unhealthy, then exits; a commit resets it', () => {
    const h = new Health({ backoffMs: 100, backoffMaxMs: 500, sickAfter: 3, exitAfter: 5 });
    expect(h.healthy).toBe(true);
    const waits = [1, 2, 3, 4].map(() => h.failed());
    expect(waits.map((w) => w.waitMs)).toEqual([100, 200, 400, 500]);
    expect(waits.map((w) => w.exit)).toEqual([false, false, false, false]);
    expect(h.healthy).toBe(false);
    expect(h.failed()).toMatchObject({ streak: 5, exit: true });
    h.committed();
    expect(h.streak).toBe(0);
    expect(h.healthy).toBe(true);
    expect(h.failed().waitMs).toBe(100);
  });

  it('exitAfter 0 never exits', () => {
    const h = new Health({ backoffMs: 1, backoffMaxMs: 1, sickAfter: 1, exitAfter: 0 });
    for (let i = 0; i < 100; i++) expect(h.failed().exit).toBe(false);
  });
});
