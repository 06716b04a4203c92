import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { ProcessState } from '../../src/process.js';

type S = 'starting' | 'running' | 'stopping' | 'stopped';

describe('process state', () => {
  it('reports each change once, runs the shutdown once, and never leaves stopping for a serving state', async () => {
    const seen: string[] = [];
    const state = new ProcessState<S>('starting', silentLogger(), 'test', (s) => seen.push(s));
    state.set('running');
    state.set('running');
    let stops = 0;
    let release!: () => void;
    const first = state.stopOnce(
      () =>
        new Promise<void>((resolve) => {
          stops++;
          release = resolve;
        }),
    );
    const second = state.stopOnce(async () => {
      stops++;
    });
    expect(state.ending).toBe(true);
    // A reconnect that finishes during shutdown must not report the process as running again.
    state.set('running');
    expect(state.value).toBe('stopping');
    release();
    await Promise.all([first, second]);
    expect(stops).toBe(1);
    expect(seen).toEqual(['running', 'stopping', 'stopped']);
  });
});
