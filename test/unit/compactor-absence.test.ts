/**
 * What a compactor's node missing from a tablet server's view of ZooKeeper proves (src/tserver/compactor-
 * watch.ts), alone: the rule, and the reads CompactorWatch makes with it against a stand-in session whose
 * answers a test chooses (a view that lags, then catches up). Against a real ZooKeeper:
 * test/tserver/compactor-watch.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { CompactorWatch, absenceMeans } from '../../src/tserver/compactor-watch.js';
import type { ZkSession } from '../../src/zk/index.js';

const QUEUE = '/exc/compactors/q001';
const C7 = `${QUEUE}/_c_0b9f3c2e-1a4d-4e6f-9a7b-2c3d4e5f6a7b-c-0000000007`;

describe('compactor absence', () => {
  it('a parent cversion at most the sequence number predates the creation; above it, the node existed', () => {
    expect(absenceMeans(C7, { cversion: 0 })).toBe('not-seen-yet');
    expect(absenceMeans(C7, { cversion: 7 })).toBe('not-seen-yet'); // the create sets it to 8
    expect(absenceMeans(C7, { cversion: 8 })).toBe('check-again');
    expect(absenceMeans(C7, { cversion: 1_000 })).toBe('check-again');
  });

  it('no queue node, or no sequence number to tell by: gone', () => {
    expect(absenceMeans(C7, null)).toBe('gone');
    expect(absenceMeans(`${QUEUE}/c-7`, { cversion: 0 })).toBe('gone');
  });

  /** A session whose node reads answer from `exists` in turn, and whose parent has `cversion`. */
  function session(reads: boolean[], cversion: number | null): ZkSession {
    return {
      state: 'connected',
      on: () => undefined,
      off: () => undefined,
      get: async (path: string) => {
        if (reads.shift()) return { data: Buffer.from('{}'), stat: {} };
        throw new ExcError('ZK_NO_NODE', `no node ${path}`);
      },
      exists: async () => (cversion === null ? null : { cversion }),
    } as unknown as ZkSession;
  }

  it('a miss in a view that predates the node: retriable, and the compactor is not marked dead', async () => {
    const watch = new CompactorWatch(session([false, true], 7), () => undefined, silentLogger());
    await expect(watch.checkAndWatch(C7)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(watch.diedAt(C7)).toBeUndefined();
    expect(await watch.checkAndWatch(C7)).toBe(true); // the view caught up
  });

  it('a miss, then a view that includes the creation: read again, and alive if it is there', async () => {
    const watch = new CompactorWatch(session([false, true], 8), () => undefined, silentLogger());
    expect(await watch.checkAndWatch(C7)).toBe(true);
    expect(watch.diedAt(C7)).toBeUndefined();
  });

  it('missing from a view that includes its creation: dead', async () => {
    const watch = new CompactorWatch(session([false, false], 9), () => undefined, silentLogger());
    expect(await watch.checkAndWatch(C7)).toBe(false);
    expect(watch.diedAt(C7)).toBeDefined();
  });
});
