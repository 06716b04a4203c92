import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planGc } from '../../src/manager/gc-plan.js';

/**
 * A random history of one instance's files: files are written, referenced by tablets, replaced (which
 * writes a ~del row in the same step), and time passes; the collector runs at random points and its
 * deletions are applied. The history is driven by the "truth" of which files are referenced.
 */
type Step =
  | { kind: 'write'; file: number; register: boolean }
  | { kind: 'replace'; file: number }
  | { kind: 'tick'; ms: number }
  | { kind: 'gc' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), file: fc.nat(30), register: fc.boolean() }),
  fc.record({ kind: fc.constant('replace' as const), file: fc.nat(30) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 400 }) }),
  fc.constant({ kind: 'gc' as const }),
);

describe('gc planner', () => {
  it('never deletes a referenced file, nor an unreferenced one before the grace period; collects the rest', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 120 }), (steps) => {
        const grace = 1_000;
        let now = 0;
        const stored = new Map<string, number>(); // object → modified
        const referenced = new Set<string>();
        const deletions = new Map<string, number>(); // ~del rows
        const unreferencedSince = new Map<string, number>();
        const deleted = new Set<string>();
        const gc = () => {
          const plan = planGc({ now, graceMs: grace, referenced, deletions, objects: stored });
          for (const f of plan.deleteFiles) {
            expect(referenced.has(f)).toBe(false);
            const since = unreferencedSince.get(f) ?? stored.get(f) ?? 0;
            expect(now - since).toBeGreaterThanOrEqual(grace);
            stored.delete(f);
            deleted.add(f);
          }
          for (const f of plan.dropRows) deletions.delete(f);
        };
        for (const s of steps) {
          if (s.kind === 'write') {
            const name = `tables/0001/I${s.file}-${now}.rf`; // names are never reused
            if (stored.has(name) || deleted.has(name)) continue;
            stored.set(name, now);
            if (s.register) referenced.add(name);
            else unreferencedSince.set(name, now);
          } else if (s.kind === 'replace') {
            const victim = [...referenced][s.file % Math.max(1, referenced.size)];
            if (!victim) continue;
            referenced.delete(victim);
            deletions.set(victim, now);
            unreferencedSince.set(victim, now);
          } else if (s.kind === 'tick') now += s.ms;
          else gc();
        }
        // Quiescence: after the grace period everything unreferenced is gone, everything referenced stays.
        now += grace;
        gc();
        for (const f of stored.keys()) expect(referenced.has(f)).toBe(true);
        for (const f of referenced) expect(stored.has(f)).toBe(true);
        expect(deletions.size).toBe(0);
      }),
      { numRuns: 500 },
    );
  });

  it('keeps a ~del row whose file is referenced again, and reports it', () => {
    const plan = planGc({
      now: 10_000,
      graceMs: 1_000,
      referenced: new Set(['a']),
      deletions: new Map([['a', 0]]),
      objects: new Map([['a', 0]]),
    });
    expect(plan).toEqual({ deleteFiles: [], dropRows: [], stillReferenced: ['a'] });
  });
});
