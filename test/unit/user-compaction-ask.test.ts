/**
 * A user compaction asked of tablets that change shape before it lands (user-compaction-request.ts,
 * askChanged): a tablet read before a split that committed first would have taken the request on its row
 * alone — the daughter that kept it — and the other daughter's rows, never compacted, would keep the very
 * entries a filter was asked to drop (what a chaos run found: a threshold split 25 ms after the request).
 */
import { describe, expect, it } from 'vitest';
import { askChanged } from '../../src/manager/user-compaction-request.js';
import { parseTablet, prevValue } from '../../src/meta/tablet.js';
import { tabletRow } from '../../src/meta/keys.js';

const tablet = (prev: string | null, end: string | null) =>
  parseTablet(
    tabletRow('0001', end === null ? null : Buffer.from(end)),
    new Map([['prev', prevValue(prev === null ? null : Buffer.from(prev))]]),
  );

describe('asking the tablets a user compaction missed', () => {
  it('asks every tablet the changed one became, and again when one of those changes too', async () => {
    const before = tablet('m', 'z');
    // It split at s (the request's put on its row failed: its prev changed), and (s, z] at u after that.
    const lower = tablet('m', 's');
    const upper = tablet('s', 'z');
    const rounds: string[][] = [];
    const took = await askChanged(
      [before],
      async () =>
        rounds.length === 0
          ? [tablet(null, 'm'), lower, upper, tablet('z', null)]
          : [tablet(null, 'm'), tablet('s', 'u'), tablet('u', 'z'), tablet('z', null)],
      async (tablets) => {
        rounds.push(tablets.map((t) => t.row));
        // The first round: (s, z] split again before its put landed.
        return tablets.map((t) => !(rounds.length === 1 && t.row === upper.row));
      },
    );
    expect(rounds).toEqual([
      [lower.row, upper.row],
      [tablet('s', 'u').row, tablet('u', 'z').row],
    ]);
    expect(took.map((t) => t.row)).toEqual([lower.row, tablet('s', 'u').row, tablet('u', 'z').row]);
  });

  it('asks nothing when nothing changed, and gives up with a clear error when the tablets never settle', async () => {
    expect(
      await askChanged(
        [],
        () => Promise.reject(new Error('not read')),
        () => Promise.reject(new Error('not asked')),
      ),
    ).toEqual([]);
    const t = tablet('a', 'b');
    await expect(
      askChanged(
        [t],
        async () => [t],
        async (tablets) => tablets.map(() => false),
      ),
    ).rejects.toThrow(/kept changing shape/);
  });
});
