/**
 * A compactor's entry counters (src/metrics.ts, entryMetrics): the entries its compactions read and wrote,
 * running ones included as far as they got, so a long job's progress shows in the metrics; a counter
 * never goes back when a job ends.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { entryMetrics, type EntryFigures } from '../../src/metrics.js';

const value = (text: string, name: string): number =>
  Number(new RegExp(`^${name}\\{queue="q"\\} (\\S+)$`, 'm').exec(text)?.[1]);

describe('compactor entry counters', () => {
  it('count running jobs as they go and ended ones once', async () => {
    const registry = new Registry();
    const running = new Map<string, { progress: EntryFigures }>();
    const m = entryMetrics(registry, 'q', () => running.values());
    const read = async () => {
      const text = await registry.metrics();
      return [
        value(text, 'excompact_compactor_entries_read_total'),
        value(text, 'excompact_compactor_entries_written_total'),
      ];
    };
    expect(await read()).toEqual([0, 0]);
    const a = { progress: { entriesRead: 100, entriesWritten: 40 } };
    running.set('a', a);
    expect(await read()).toEqual([100, 40]);
    a.progress = { entriesRead: 250, entriesWritten: 90 };
    running.set('b', { progress: { entriesRead: 10, entriesWritten: 0 } });
    expect(await read()).toEqual([260, 90]);
    // a ends: its figures move to the ended ones; nothing is counted twice.
    m.ended(a.progress);
    running.delete('a');
    expect(await read()).toEqual([260, 90]);
    // b stopped early and its figures were lost (a restart of the job): the counter holds.
    running.delete('b');
    expect(await read()).toEqual([260, 90]);
    running.set('c', { progress: { entriesRead: 20, entriesWritten: 5 } });
    expect(await read()).toEqual([270, 95]);
  });
});
