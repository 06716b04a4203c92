import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupCallers, type Caller } from '../../src/meta/mutation-groups.js';
import type { Fence } from '../../src/meta/tablet.js';
import type { Mutation } from '../../src/meta/types.js';

const fences: (Fence | undefined)[] = [
  undefined,
  { server: 'h:1', session: 's1' },
  { server: 'h:2', session: 's2' },
];

const callerArb: fc.Arbitrary<Caller> = fc
  .record({
    fence: fc.constantFrom(...fences),
    mutations: fc.array(
      fc
        .record({ row: fc.constantFrom('r', 'row-é'), value: fc.string({ maxLength: 300 }) })
        .map((c): Mutation => ({ puts: [{ row: c.row, col: 'c', value: c.value }] })),
      { minLength: 1, maxLength: 40 },
    ),
  })
  .map((c) => ({ ...c, bytes: Buffer.byteLength(JSON.stringify(c.mutations)) }));

describe('mutation groups', () => {
  it('groups - one fence each, every caller whole and in order, the body size exact and within the limits', () => {
    fc.assert(
      fc.property(
        fc.array(callerArb, { maxLength: 30 }),
        fc.integer({ min: 200, max: 20_000 }),
        fc.integer({ min: 1, max: 60 }),
        (callers, maxBodyBytes, groupMutations) => {
          const groups = groupCallers(callers, { maxBodyBytes, groupMutations });
          expect(
            groups.flatMap((g) => g.callers).sort((a, b) => callers.indexOf(a) - callers.indexOf(b)),
          ).toEqual(callers);
          for (const g of groups) {
            expect(g.callers.every((c) => c.fence === g.fence)).toBe(true);
            const body = { mutations: g.callers.flatMap((c) => c.mutations), fence: g.fence };
            expect(g.bodyBytes).toBe(Buffer.byteLength(JSON.stringify(body)));
            expect(g.count).toBe(body.mutations.length);
            // Over a limit only alone: a caller too large for any request is refused on its own.
            if (g.callers.length > 1) {
              expect(g.bodyBytes).toBeLessThanOrEqual(maxBodyBytes);
              expect(g.count).toBeLessThanOrEqual(groupMutations);
            }
            // A fence's callers keep their order across its groups.
            const same = callers.filter((c) => c.fence === g.fence);
            const at = g.callers.map((c) => same.indexOf(c));
            expect(at).toEqual([...at].sort((a, b) => a - b));
          }
        },
      ),
    );
  });

  it('groups - never more than 10,000 mutations in one request, however the callers come', () => {
    const caller = (n: number): Caller => {
      const mutations = Array.from({ length: n }, (): Mutation => ({ deleteRows: ['r'] }));
      return { mutations, bytes: Buffer.byteLength(JSON.stringify(mutations)) };
    };
    const groups = groupCallers([caller(1_000), caller(9_500), caller(10_000), caller(1), caller(999)], {
      groupMutations: 50_000,
    });
    expect(groups.map((g) => g.count)).toEqual([1_000, 9_500, 10_000, 1_000]);
  });
});
