import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { backoffDelay, retry, withTimeout } from '../../src/retry.js';

describe('retry', () => {
  it('retries retriable failures and returns the first success', async () => {
    let n = 0;
    const result = await retry(
      async () => {
        if (++n < 3) throw new ExcError('UNAVAILABLE', 'down');
        return 'ok';
      },
      { baseMs: 1 },
    );
    expect(result).toBe('ok');
    expect(n).toBe(3);
  });

  it('never retries a programming error or a final answer', async () => {
    let n = 0;
    await expect(
      retry(async () => {
        n++;
        throw new TypeError('bug');
      }),
    ).rejects.toThrow('bug');
    expect(n).toBe(1);
    await expect(
      retry(async () => Promise.reject(new ExcError('ZK_SESSION_LOST', 'gone'))),
    ).rejects.toMatchObject({
      code: 'ZK_SESSION_LOST',
    });
  });

  it('stops after the given attempts', async () => {
    let n = 0;
    await expect(
      retry(
        async () => {
          n++;
          throw new ExcError('UNAVAILABLE', 'down');
        },
        { attempts: 4, baseMs: 1 },
      ),
    ).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(n).toBe(4);
  });

  it('backoff is jittered below an exponential ceiling', () => {
    for (let attempt = 0; attempt < 12; attempt++) {
      const d = backoffDelay(attempt, { baseMs: 10, maxMs: 1_000 });
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(Math.min(1_000, 10 * 2 ** attempt));
    }
  });

  it('backoff spreads callers over the whole interval, not a fixed delay', () => {
    // Full jitter: uniform in [0, ceiling], so callers that failed together do not retry in lock step.
    // 200 draws put about 100 in each half of the interval; 40 or fewer happens by chance < 1e-15.
    const ceiling = 10 * 2 ** 5;
    const delays = Array.from({ length: 200 }, () => backoffDelay(5, { baseMs: 10, maxMs: 1_000 }));
    expect(new Set(delays).size).toBeGreaterThan(100);
    expect(delays.filter((d) => d < ceiling / 2).length).toBeGreaterThan(40);
    expect(delays.filter((d) => d >= ceiling / 2).length).toBeGreaterThan(40);
  });

  it('withTimeout rejects with TIMEOUT and ignores the late result', async () => {
    const late = new Promise((resolve) => setTimeout(() => resolve('late'), 200));
    await expect(withTimeout(late, 20)).rejects.toMatchObject({ code: 'TIMEOUT' });
  });
});
