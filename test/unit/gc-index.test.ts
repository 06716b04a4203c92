/**
 * The collector's reference table (gc-index.ts) against the truth: random mutations of tablet rows —
 * files, reservations with checkpoints, kept checkpoints, split jobs, holds, whole-row deletes, rows
 * that are not tablets — applied to a model of the store's cells and to the table; after every one, the
 * table must say exactly what a full read of the model says (gc-plan.ts, tabletReferences). And a table
 * built from a snapshot taken anywhere in the history, with every mutation from some point before it
 * replayed, must equal the one that followed the whole history.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyMutation } from '../../src/manager/followed-index.js';
import { ReferenceTable } from '../../src/manager/gc-index.js';
import { tabletReferences } from '../../src/manager/gc-plan.js';
import { tabletRow } from '../../src/meta/keys.js';
import { parseTablet } from '../../src/meta/tablet.js';
import type { Mutation } from '../../src/meta/types.js';
import { applyToCells, type Cells } from '../support/meta-rows.js';

const SETTINGS = { versions: 1, nowMs: 0, filters: [], dropDeletes: true };
const ROWS = [tabletRow('0001', Buffer.from('m')), tabletRow('0001', null), tabletRow('0002', null)];
const file = (n: number) => `tables/0001/F${n}.rf`;
const checkpoint = (parts: number[]) => ({
  parts: parts.map((p) => ({ name: `${file(p)}.part${p}`, size: 1 })),
  bytes: 1,
  state: 's',
  at: 0,
});

const fileNo = fc.nat(12);
const cell: fc.Arbitrary<{ col: string; value: string }> = fc.oneof(
  fileNo.map((n) => ({ col: `file:${file(n)}`, value: JSON.stringify({ size: 1, entries: 1 }) })),
  fc
    .record({
      id: fc.nat(3),
      inputs: fc.array(fileNo, { minLength: 1, maxLength: 3 }),
      output: fileNo,
      parts: fc.option(fc.array(fileNo, { minLength: 1, maxLength: 2 }), { nil: undefined }),
    })
    .map(({ id, inputs, output, parts }) => ({
      col: `ecomp:E${id}`,
      value: JSON.stringify({
        compactor: '/c/c-1',
        queueId: 'q1',
        inputs: inputs.map(file),
        output: file(output),
        kind: 'system',
        attempt: 0,
        reservedAt: 0,
        allFiles: false,
        settings: SETTINGS,
        ...(parts ? { checkpoint: checkpoint(parts) } : {}),
      }),
    })),
  fc
    .record({ id: fc.nat(2), parts: fc.array(fileNo, { minLength: 1, maxLength: 2 }) })
    .map(({ id, parts }) => ({
      col: `resume:R${id}`,
      value: JSON.stringify({
        queueId: 'q1',
        inputs: [file(0)],
        kind: 'system',
        allFiles: false,
        settings: SETTINGS,
        checkpoint: checkpoint(parts),
        fromEcid: 'E0',
      }),
    })),
  fc.record({ id: fc.nat(2), out: fc.option(fileNo, { nil: null }) }).map(({ id, out }) => ({
    col: `split:S${id}`,
    value: JSON.stringify({
      inputs: [file(1)],
      kind: 'system',
      allFiles: false,
      settings: SETTINGS,
      bounds: ['6d'],
      createdAt: 0,
      done: [out === null ? null : { output: file(out), size: 1, entries: 1 }, null],
    }),
  })),
  fc.record({ id: fc.nat(2), out: fileNo }).map(({ id, out }) => ({
    col: `hold:H${id}`,
    value: JSON.stringify({
      tablet: ROWS[0],
      inputs: [file(2)],
      output: file(out),
      kind: 'system',
      clip: {},
      nowMs: 0,
      share: 1,
      at: 0,
    }),
  })),
  fc.constant({ col: 'loc', value: JSON.stringify({ server: 'ts', session: '00000000000000a1' }) }),
);

type Op =
  | { kind: 'put'; row: string; col: string; value: string }
  | { kind: 'delete'; row: string; col: string }
  | { kind: 'deleteRow'; row: string };

const row = fc.oneof(fc.constantFrom(...ROWS), fc.constant('~del:tables/0001/F1.rf'));
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ row, c: cell }).map(({ row, c }) => ({ kind: 'put' as const, row, ...c })),
  fc.record({ row, c: cell }).map(({ row, c }) => ({ kind: 'delete' as const, row, col: c.col })),
  fc.record({ row }).map(({ row }) => ({ kind: 'deleteRow' as const, row })),
);
/** A mutation of a few operations, in the order the store applies them (deletes, whole rows, puts). */
const mutation: fc.Arbitrary<Mutation> = fc.array(op, { minLength: 1, maxLength: 4 }).map((ops) => ({
  deletes: ops.flatMap((o) => (o.kind === 'delete' ? [{ row: o.row, col: o.col }] : [])),
  deleteRows: ops.flatMap((o) => (o.kind === 'deleteRow' ? [o.row] : [])),
  puts: ops.flatMap((o) => (o.kind === 'put' ? [{ row: o.row, col: o.col, value: o.value }] : [])),
}));

/** What a full read of `cells` says is referenced, and written. */
function fullRead(cells: Cells): { referenced: Set<string>; writing: Set<string> } {
  const referenced = new Set<string>();
  const writing = new Set<string>();
  for (const [r, cols] of cells) {
    if (r.startsWith('~') || cols.size === 0) continue;
    tabletReferences(parseTablet(r, cols), {
      referenced: (f) => referenced.add(f),
      writing: (f) => writing.add(f),
    });
  }
  return { referenced, writing };
}

const ALL_NAMES = Array.from({ length: 13 }, (_, n) => [file(n), `${file(n)}.part${n}`]).flat();

function expectSame(table: ReferenceTable, truth: { referenced: Set<string>; writing: Set<string> }): void {
  for (const name of ALL_NAMES) {
    expect(table.referenced.has(name), `referenced ${name}`).toBe(truth.referenced.has(name));
    expect(table.writing.has(name), `writing ${name}`).toBe(truth.writing.has(name));
  }
}

describe('reference table', () => {
  it('says after every mutation exactly what a full read of the store says', () => {
    fc.assert(
      fc.property(fc.array(mutation, { maxLength: 60 }), (history) => {
        const cells: Cells = new Map();
        const table = new ReferenceTable();
        for (const m of history) {
          applyToCells(cells, m);
          applyMutation(table, m);
          expectSame(table, fullRead(cells));
        }
      }),
    );
  });

  it('built from a snapshot anywhere, with the mutations from before it replayed, equals the one kept', () => {
    fc.assert(
      fc.property(
        fc.array(mutation, { minLength: 1, maxLength: 60 }),
        fc.nat(),
        fc.nat(),
        (history, a, b) => {
          const snapshotAt = a % (history.length + 1);
          const listenFrom = Math.min(snapshotAt, b % (history.length + 1));
          const kept = new ReferenceTable();
          const cells: Cells = new Map();
          let built: ReferenceTable | undefined;
          history.forEach((m, i) => {
            if (i === snapshotAt) built = fromCells(cells);
            applyToCells(cells, m);
            applyMutation(kept, m);
          });
          built ??= fromCells(cells);
          // The build listened from `listenFrom`: it replays what it heard from there on.
          for (const m of history.slice(listenFrom)) applyMutation(built, m);
          expect(built.differences(kept)).toEqual([]);
          expectSame(built, fullRead(cells));
        },
      ),
    );
  });

  it('finds a difference planted in one of two tables', () => {
    const a = new ReferenceTable();
    const b = new ReferenceTable();
    const put = { row: ROWS[0]!, col: `file:${file(1)}`, value: '{"size":1,"entries":1}' };
    applyMutation(a, { puts: [put] });
    expect(a.differences(b)).toEqual([file(1)]);
    applyMutation(b, { puts: [put] });
    expect(a.differences(b)).toEqual([]);
  });

  it('keeps a cell it cannot read as unreadable until the cell is replaced or gone', () => {
    const table = new ReferenceTable();
    table.put(ROWS[0]!, 'ecomp:E1', '{not json');
    expect([...table.unreadable.keys()]).toEqual([`${ROWS[0]} ecomp:E1`]);
    table.put(ROWS[0]!, 'ecomp:E1', '{"also":"not a reservation"}');
    expect(table.unreadable.size).toBe(1);
    table.deleteRow(ROWS[0]!);
    expect(table.unreadable.size).toBe(0);
  });
});

function fromCells(cells: Cells): ReferenceTable {
  const table = new ReferenceTable();
  for (const [r, cols] of cells) for (const [col, value] of cols) table.put(r, col, value);
  return table;
}
