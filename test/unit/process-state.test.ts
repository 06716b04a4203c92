import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { ProcessState, type Lifecycle } from '../../src/process.js';

type S = 'connecting' | 'serving' | 'suspended' | 'expired' | 'rejoining';
const LIFE: Lifecycle<S> = {
  connecting: ['serving'],
  serving: ['suspended', 'expired'],
  suspended: ['serving', 'expired'],
  expired: ['rejoining'],
  rejoining: ['serving'],
};

describe('process state', () => {
  it('reports each change once, runs the shutdown once, and never leaves stopping for a serving state', async () => {
    const seen: string[] = [];
    const state = new ProcessState<S>({
      initial: 'connecting',
      lifecycle: LIFE,
      log: silentLogger(),
      what: 'test',
      onChange: (s, cause) => seen.push(`${s}:${cause}`),
    });
    expect(state.set('serving', 'registered')).toBe(true);
    expect(state.set('serving', 'again')).toBe(false);
    let stops = 0;
    let release!: () => void;
    const first = state.stopOnce(
      () =>
        new Promise<void>((resolve) => {
          stops++;
          release = resolve;
        }),
      'SIGTERM',
    );
    const second = state.stopOnce(async () => {
      stops++;
    });
    expect(state.ending).toBe(true);
    // A reconnect that finishes during shutdown must not report the process as serving again.
    expect(state.set('suspended', 'late event')).toBe(false);
    expect(state.value).toBe('stopping');
    release();
    await Promise.all([first, second]);
    expect(stops).toBe(1);
    expect(seen).toEqual(['serving:registered', 'stopping:SIGTERM', 'stopped:shutdown done']);
  });

  it('refuses a transition the lifecycle does not allow, and exports the state and the transitions', async () => {
    const registry = new Registry();
    const state = new ProcessState<S>({
      initial: 'connecting',
      lifecycle: LIFE,
      log: silentLogger(),
      what: 'test',
      registry,
    });
    expect(state.set('expired', 'nonsense')).toBe(false); // connecting → expired is not in the lifecycle
    expect(state.value).toBe('connecting');
    for (const [to, cause] of [
      ['serving', 'up'],
      ['suspended', 'disconnected'],
      ['expired', 'session lost'],
      ['rejoining', 'new session'],
      ['serving', 'registered again'],
    ] as const)
      expect(state.set(to, cause)).toBe(true);
    const metrics = await registry.metrics();
    expect(metrics).toMatch(/excompact_process_state\{state="serving"\} 1/);
    expect(metrics).toMatch(/excompact_process_state\{state="expired"\} 0/);
    expect(metrics).toMatch(/excompact_process_transitions_total\{from="serving",to="suspended"\} 1/);
    expect(metrics).toMatch(/excompact_process_transitions_total\{from="rejoining",to="serving"\} 1/);
  });
});
