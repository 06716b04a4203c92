/**
 * The index of activity (tablet-activity.ts) against the truth: random mutations of tablet rows — hosts,
 * files of random sizes, working columns, other columns, whole-row deletes — applied to a model of the
 * store's cells and to the table; after every one, which tablets have work and what each server hosts
 * must be what a full read of the model says.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyMutation } from '../../src/manager/followed-index.js';
import { ActivityTable } from '../../src/manager/tablet-activity.js';
import { tabletRow } from '../../src/meta/keys.js';
import type { Mutation } from '../../src/meta/types.js';
import { applyToCells, type Cells } from '../support/meta-rows.js';

const ROWS = [tabletRow('0001', Buffer.from('m')), tabletRow('0001', null), tabletRow('0002', null)];
const cell = fc.oneof(
  fc.constantFrom('ts-a', 'ts-b').map((server) => ({
    col: 'loc',
    value: JSON.stringify({ server, session: '00000000000000a1' }),
  })),
  fc.record({ n: fc.nat(2), size: fc.integer({ min: 1, max: 1_000 }) }).map(({ n, size }) => ({
    col: `file:tables/0001/F${n}.rf`,
    value: JSON.stringify({ size, entries: 1 }),
  })),
  fc.constantFrom('ecomp:E1', 'queued:q1', 'failed:k', 'compact:U1', 'split:S1', 'selected').map((col) => ({
    col,
    value: '{}',
  })),
  fc.constantFrom('prev', 'ver', 'progress:E1').map((col) => ({ col, value: '1' })),
);
const row = fc.constantFrom(...ROWS, '~cq:q1:000:00000001:0001<');
const mutation: fc.Arbitrary<Mutation> = fc
  .array(
    fc.oneof(
      fc.record({ kind: fc.constant('put'), row, c: cell }),
      fc.record({ kind: fc.constant('delete'), row, c: cell }),
      fc.record({ kind: fc.constant('deleteRow'), row, c: cell }),
    ),
    { minLength: 1, maxLength: 4 },
  )
  .map((ops) => ({
    deletes: ops.filter((o) => o.kind === 'delete').map((o) => ({ row: o.row, col: o.c.col })),
    deleteRows: ops.filter((o) => o.kind === 'deleteRow').map((o) => o.row),
    puts: ops.filter((o) => o.kind === 'put').map((o) => ({ row: o.row, col: o.c.col, value: o.c.value })),
  }));

/** What a full read of `cells` says. */
function fullRead(cells: Cells): {
  busy: string[];
  hosts: Record<string, { tablets: number; bytes: number }>;
} {
  const busy: string[] = [];
  const hosts: Record<string, { tablets: number; bytes: number }> = {};
  for (const [r, cols] of cells) {
    if (r.startsWith('~')) continue;
    const keys = [...cols.keys()];
    if (keys.some((c) => c === 'selected' || /^(ecomp|queued|failed|compact|split):/.test(c))) busy.push(r);
    const loc = cols.get('loc');
    if (loc === undefined) continue;
    const server = (JSON.parse(loc) as { server: string }).server;
    const h = (hosts[server] ??= { tablets: 0, bytes: 0 });
    h.tablets++;
    for (const c of keys)
      if (c.startsWith('file:')) h.bytes += (JSON.parse(cols.get(c)!) as { size: number }).size;
  }
  return { busy: busy.sort(), hosts };
}

describe('index of activity', () => {
  it('says after every mutation which tablets have work and what each server hosts', () => {
    fc.assert(
      fc.property(fc.array(mutation, { maxLength: 80 }), (history) => {
        const cells: Cells = new Map();
        const table = new ActivityTable();
        for (const m of history) {
          applyToCells(cells, m);
          applyMutation(table, m);
          const truth = fullRead(cells);
          expect([...table.busy].sort()).toEqual(truth.busy);
          expect(Object.fromEntries(table.hosts)).toEqual(truth.hosts);
        }
        // And a table built from the cells as they are now says the same.
        const built = new ActivityTable();
        for (const [r, cols] of cells) for (const [col, value] of cols) built.put(r, col, value);
        expect(built.differences(table)).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it("moves a tablet's bytes with it, and takes a file's bytes away with the file", () => {
    const t = new ActivityTable();
    const r = ROWS[0]!;
    const loc = (server: string) => ({ row: r, col: 'loc', value: JSON.stringify({ server, session: 's' }) });
    applyMutation(t, { puts: [loc('a'), { row: r, col: 'file:F1', value: '{"size":10,"entries":1}' }] });
    expect(Object.fromEntries(t.hosts)).toEqual({ a: { tablets: 1, bytes: 10 } });
    applyMutation(t, { puts: [loc('b'), { row: r, col: 'file:F2', value: '{"size":5,"entries":1}' }] });
    expect(Object.fromEntries(t.hosts)).toEqual({ b: { tablets: 1, bytes: 15 } });
    applyMutation(t, { deletes: [{ row: r, col: 'file:F1' }] });
    expect(Object.fromEntries(t.hosts)).toEqual({ b: { tablets: 1, bytes: 5 } });
    applyMutation(t, { deleteRows: [r] });
    expect(t.hosts.size).toBe(0);
    expect(t.tablets).toBe(0);
  });
});
