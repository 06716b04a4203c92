/**
 * The mutation a hosted tablet's change becomes (src/tserver/tablet-change.ts): fenced by `loc` and by the
 * copy's version, bumping the version, with the queue entries and completed user compactions.
 */
import { describe, expect, it } from 'vitest';
import { parseTablet } from '../../src/meta/tablet.js';
import { HostedTablet } from '../../src/tserver/hosted-tablet.js';
import { buildChange, preview, withUserStep } from '../../src/tserver/tablet-change.js';

const me = { server: 'ts:1', session: '00000000000000aa' };

function tablet(version: number): HostedTablet {
  const meta = parseTablet('0001<', new Map([['prev', 'null']]));
  meta.version = version;
  meta.files.set('a', { size: 1, entries: 1 });
  return new HostedTablet(meta, me);
}

describe('tablet change', () => {
  it('fences by loc and by the version of the copy, and puts the next version', () => {
    const first = buildChange(
      tablet(0),
      { puts: [{ row: '0001<', col: 'file:b', value: '{}' }] },
      undefined,
      () => undefined,
    );
    expect(first.mutation.conditions.slice(0, 2)).toEqual([
      { op: 'equals', row: '0001<', col: 'loc', value: JSON.stringify(me) },
      { op: 'absent', row: '0001<', col: 'ver' },
    ]);
    expect(first.mutation.puts.at(-1)).toEqual({ row: '0001<', col: 'ver', value: '1' });
    expect(first.empty).toBe(false);
    const later = buildChange(
      tablet(7),
      { conditions: [{ op: 'present', row: '0001<', col: 'file:a' }] },
      undefined,
      () => undefined,
    );
    expect(later.mutation.conditions[1]).toEqual({ op: 'equals', row: '0001<', col: 'ver', value: '7' });
    expect(later.mutation.conditions[2]).toEqual({ op: 'present', row: '0001<', col: 'file:a' });
    // Nothing but the version to write: nothing is sent.
    expect(later.empty).toBe(true);
  });

  it('a preview is the copy with the change applied, and the copy is untouched', () => {
    const t = tablet(3);
    const p = preview(t, { apply: (m) => m.files.delete('a') });
    expect(p.files.size).toBe(0);
    expect(t.meta.files.size).toBe(1);
  });

  it('a preview changes no map of the copy: files, reservations, failures, kept checkpoints, splits', () => {
    const t = tablet(3);
    const split = {
      inputs: ['a'],
      kind: 'system' as const,
      allFiles: true,
      bounds: ['62'],
      done: [null, null],
    };
    t.meta.splits.set('S0', {
      ...split,
      settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: true },
      createdAt: 1,
    });
    // What a reservation, a commit or a cancel does to a preview: the live copy changes only once the
    // store applied the change (a refused one must leave it as the store has it).
    const p = preview(t, {
      apply: (m) => {
        m.splits.delete('S0');
        m.splits.set('S1', m.splits.get('S0') ?? t.meta.splits.get('S0')!);
        m.resumes.set('K', {} as never);
        m.failures.set('F', {} as never);
        m.reservations.set('E', {} as never);
      },
    });
    expect([...p.splits.keys()]).toEqual(['S1']);
    expect([...t.meta.splits.keys()]).toEqual(['S0']);
    expect(t.meta.resumes.size + t.meta.failures.size + t.meta.reservations.size).toBe(0);
  });

  it('a replanned change carries the user step: a request selected, or completed on a tablet left without files', () => {
    const t = tablet(3);
    t.meta.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    const selected = withUserStep(t, { puts: [{ row: '0001<', col: 'file:b', value: '{}' }] }, 0);
    expect(selected.puts).toContainEqual({
      row: '0001<',
      col: 'selected',
      value: JSON.stringify({ ids: ['U1'], files: ['a'], filters: [] }),
    });
    const emptied = withUserStep(t, { apply: (m) => m.files.delete('a') }, 0);
    expect(emptied.deletes).toContainEqual({ row: '0001<', col: 'compact:U1' });
    const p = preview(t, emptied);
    expect(p.userCompactions.size).toBe(0);
    expect(p.selection).toBeUndefined();
  });

  it('a cell the user step deletes is not also written by the change (a split dropped as its sub-job ends)', () => {
    const t = tablet(3);
    // A user split whose request is gone (cancelled), with one sub-job done and one still reserved.
    const split = {
      inputs: ['a'],
      kind: 'user' as const,
      allFiles: true,
      settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: true },
      userCompactionIds: ['U1'],
      bounds: ['6d'],
      done: [{ output: 'tables/0001/C1.rf', size: 5, entries: 1 }, null],
      createdAt: 1,
    };
    t.meta.splits.set('S', split);
    t.meta.reservations.set('E', { split: { id: 'S', index: 1, of: 2 } } as never);
    // The change ends the last reservation and records its output in the split, as a commit would.
    const after = { ...split, done: [split.done[0]!, { output: 'tables/0001/C2.rf', size: 5, entries: 1 }] };
    const change = withUserStep(
      t,
      {
        puts: [
          { row: '0001<', col: 'split:S', value: JSON.stringify(after) },
          { row: '0001<', col: 'file:b', value: '{}' },
        ],
        apply: (m) => {
          m.reservations.delete('E');
          m.splits.set('S', after);
        },
      },
      42,
    );
    expect(change.deletes).toContainEqual({ row: '0001<', col: 'split:S' });
    expect(change.puts!.filter((c) => c.col === 'split:S')).toEqual([]);
    expect(change.puts).toContainEqual({ row: '0001<', col: 'file:b', value: '{}' });
    // Both sub-jobs' outputs are marked for the collector.
    expect(change.puts!.filter((c) => c.row.startsWith('~del:')).map((c) => c.row)).toEqual([
      '~del:tables/0001/C1.rf',
      '~del:tables/0001/C2.rf',
    ]);
    expect(preview(t, change).splits.size).toBe(0);
  });
});
