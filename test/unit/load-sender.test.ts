/**
 * The manager's load requests (src/manager/load-sender.ts): the tablets asked for one server in one go
 * share requests of a bounded size, a bounded number at once; a load waiting or in flight is not asked
 * again; another server or session is a request of its own.
 */
import { describe, expect, it } from 'vitest';
import { LoadSender } from '../../src/manager/load-sender.js';
import type { Location } from '../../src/meta/tablet.js';

const a: Location = { server: 'ts-a:1', session: 's1' };
const b: Location = { server: 'ts-b:1', session: 's2' };

describe('load sender', () => {
  it('batches, bounds what is in flight, and sends each tablet once while it is under way', async () => {
    const sent: { tablets: string[]; server: string }[] = [];
    const open: (() => void)[] = [];
    const loads = new LoadSender(
      (tablets, loc) =>
        new Promise<void>((resolve) => {
          sent.push({ tablets, server: loc.server });
          open.push(resolve);
        }),
      { batch: 3, inFlight: 2 },
    );
    for (let i = 0; i < 8; i++) loads.enqueue(`t${i}`, a);
    loads.enqueue('t0', a); // already waiting
    loads.enqueue('u0', b);
    loads.enqueue('t0', { ...a, session: 's9' }); // a new session of the server: its own load
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([
      { tablets: ['t0', 't1', 't2'], server: 'ts-a:1' },
      { tablets: ['t3', 't4', 't5'], server: 'ts-a:1' },
      { tablets: ['u0'], server: 'ts-b:1' },
      { tablets: ['t0'], server: 'ts-a:1' },
    ]);
    expect(loads.has('t7', a)).toBe(true);
    loads.enqueue('t1', a); // in flight
    open.shift()!(); // the first request answers: the next batch goes
    await new Promise((r) => setImmediate(r));
    expect(sent.slice(4)).toEqual([{ tablets: ['t6', 't7'], server: 'ts-a:1' }]);
    expect(loads.has('t1', a)).toBe(false);
    loads.enqueue('t1', a); // done: asked again, it is sent again
    for (const resolve of open.splice(0)) resolve();
    await new Promise((r) => setTimeout(r, 10));
    expect(sent.at(-1)).toEqual({ tablets: ['t1'], server: 'ts-a:1' });
  });

  it('a request that fails frees its tablets to be asked again', async () => {
    let calls = 0;
    const loads = new LoadSender(async () => {
      calls++;
      throw new Error('refused');
    });
    loads.enqueue('t0', a);
    await new Promise((r) => setTimeout(r, 10));
    expect(loads.has('t0', a)).toBe(false);
    loads.enqueue('t0', a);
    await new Promise((r) => setTimeout(r, 10));
    expect(calls).toBe(2);
  });
});
