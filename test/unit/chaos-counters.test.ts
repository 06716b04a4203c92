import { describe, expect, it } from 'vitest';
import { TableModel, type ScannedLine } from '../../chaos/model.js';

/** The chaos run's model of a table that sums a family (chaos/counters.ts): it must catch every miscount. */
describe('chaos model - counters', () => {
  const model = (): TableModel => {
    const m = new TableModel('counters', 'seed', 1, undefined, undefined, 'n');
    m.apply([
      { row: 'a01', cf: 'n', cq: 'c', ts: 0, delta: 5 },
      { row: 'b02', cf: 'n', cq: 'c', ts: 0, delta: -2 },
      { row: 'p001', cf: 'a', cq: 'x', ts: 400 },
    ]);
    m.apply([{ row: 'a01', cf: 'n', cq: 'c', ts: 0, delta: 7 }]);
    m.apply([{ row: 'b02', cf: 'n', cq: 'c', ts: 0, delete: true }]);
    m.apply([{ row: 'c03', cf: 'n', cq: 'c', ts: 0, delete: true }]);
    m.apply([{ row: 'c03', cf: 'n', cq: 'c', ts: 0, delta: 0 }]);
    return m;
  };
  const plain = (m: TableModel): ScannedLine => ({
    row: 'p001',
    cf: 'a',
    cq: 'x',
    ts: 400,
    value: m.valueOf('p001', 'a', 'x', 400),
  });
  const counter = (row: string, value: string): ScannedLine => ({ row, cf: 'n', cq: 'c', ts: 9, value });

  it('a counter shows the sum of its increments since its last reset, once; plain cells beside it as ever', () => {
    const m = model();
    const c = m.compare([counter('a01', '12'), plain(m), counter('c03', '0')]);
    expect(c).toMatchObject({ expected: 3, counters: 2, lost: 0, resurrected: 0, wrong: 0 });
    expect(m.counters!.increments).toBe(4);
    expect(m.counters!.resets).toBe(2);
  });

  it('flags a wrong sum, a counter missing, shown twice, shown after its reset or never written', () => {
    const m = model();
    expect(m.compare([counter('a01', '19'), plain(m), counter('c03', '0')])).toMatchObject({ wrong: 1 });
    expect(m.compare([plain(m), counter('c03', '0')])).toMatchObject({ lost: 1 });
    expect(
      m.compare([counter('a01', '12'), counter('a01', '12'), plain(m), counter('c03', '0')]),
    ).toMatchObject({ wrong: 1 });
    const after = m.compare([counter('a01', '12'), counter('b02', '-2'), plain(m), counter('c03', '0')]);
    expect(after).toMatchObject({ resurrected: 1, wrong: 0 });
    expect(after.examples[0]).toContain('resurrected counter: b02/n/c');
    expect(
      m.compare([counter('a01', '12'), plain(m), counter('c03', '0'), counter('z9', '1')]),
    ).toMatchObject({
      wrong: 1,
    });
  });
});
