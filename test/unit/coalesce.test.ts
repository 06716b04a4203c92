import { describe, expect, it } from 'vitest';
import { Coalesced, KeptCurrent } from '../../src/coalesce.js';
import { silentLogger } from '../../src/log.js';

describe('coalesced runs', () => {
  it('runs one at a time; calls during a run make exactly one more run that started after them', async () => {
    let runs = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const task = new Coalesced(
      async () => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        runs++;
        inFlight--;
      },
      () => undefined,
    );
    await Promise.all([task.run(), task.run(), task.run(), task.run()]);
    expect(runs).toBe(2);
    expect(maxInFlight).toBe(1);
  });

  it('keeps running after a failed run and reports the error', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const task = new Coalesced(
      async () => {
        if (++calls === 1) throw new Error('first fails');
      },
      (err) => errors.push(err),
    );
    await task.run();
    await task.run();
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });
});

describe('a view kept current', () => {
  it('start retries the first read until it succeeds, then re-reads periodically until stopped', async () => {
    let reads = 0;
    const view = new KeptCurrent({
      what: 'a test view',
      read: async () => {
        reads++;
        if (reads < 3) throw new Error('not yet');
      },
      everyMs: 20,
      retryWhile: () => true,
      log: silentLogger(),
    });
    await view.start();
    expect(reads).toBe(3);
    await new Promise((r) => setTimeout(r, 150));
    const afterPeriodic = reads;
    expect(afterPeriodic).toBeGreaterThan(3);
    await view.stop();
    await new Promise((r) => setTimeout(r, 60));
    expect(reads).toBe(afterPeriodic);
  });

  it('gives up on the first read once retryWhile no longer holds', async () => {
    const view = new KeptCurrent({
      what: 'a test view',
      read: () => Promise.reject(new Error('unreachable source')),
      everyMs: 1_000,
      retryWhile: () => false,
      log: silentLogger(),
    });
    await expect(view.start()).rejects.toThrow('unreachable source');
  });
});
