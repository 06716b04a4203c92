/**
 * CompactorLinks' decisions, on their own (the whole path, with a compactor killed with SIGKILL:
 * test/compactor/links.test.ts): a compactor whose link closed while it held reservations here is fenced
 * after the grace; one whose link closed while its reservation was still being made is fenced once the
 * reservation is recorded.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { CompactorLinks } from '../../src/tserver/compactor-links.js';

const GRACE_MS = 20;
const settle = () => new Promise((r) => setTimeout(r, GRACE_MS * 4));

function links() {
  const held = new Set<string>();
  const fenced: string[] = [];
  const l = new CompactorLinks({
    holds: (c) => held.has(c),
    deleteNode: async (c) => {
      fenced.push(c);
    },
    graceMs: GRACE_MS,
    log: silentLogger(),
  });
  /** Opens a link; the returned function closes it as a dead process's connection closes. */
  const link = (c: string) => {
    const connection = new AbortController();
    void l.hold(c, connection.signal);
    return () => connection.abort();
  };
  return { l, held, fenced, link };
}

describe('compactor links', () => {
  it('a link closing while its compactor holds reservations fences it after the grace', async () => {
    const { held, fenced, link } = links();
    held.add('/c1');
    link('/c1')();
    expect(fenced).toEqual([]);
    await settle();
    expect(fenced).toEqual(['/c1']);
  });

  it('a link closing while the reservation is being made: fenced once it is recorded (found by a review)', async () => {
    const { l, held, fenced, link } = links();
    link('/c1')(); // killed mid-reserve: the link closed while it held nothing here
    await settle();
    expect(fenced).toEqual([]);
    held.add('/c1'); // the reservation lands
    l.reserved('/c1');
    await settle();
    expect(fenced).toEqual(['/c1']);
  });

  it('a reservation with the link open, or of a compactor never linked, fences nothing', async () => {
    const { l, held, fenced, link } = links();
    link('/c1');
    held.add('/c1');
    held.add('/c2');
    l.reserved('/c1');
    l.reserved('/c2');
    await settle();
    expect(fenced).toEqual([]);
    l.close();
  });

  it('a fence ZooKeeper fails (no quorum) is tried again until it goes through, while the compactor holds work and stays unlinked', async () => {
    const held = new Set(['/c1', '/c2']);
    const tries: string[] = [];
    const l = new CompactorLinks({
      holds: (c) => held.has(c),
      deleteNode: async (c) => {
        tries.push(c);
        // /c1's delete fails twice, as while ZooKeeper has no leader; /c2's always does.
        if (c === '/c2' || tries.filter((t) => t === c).length <= 2)
          throw new ExcError('ZK_TIMEOUT', `zookeeper delete ${c}: no answer within 4000 ms`);
      },
      graceMs: GRACE_MS,
      log: silentLogger(),
    });
    l.fence('/c1', 'test');
    l.fence('/c2', 'test');
    // While a fence is pending, the probe leaves the compactor alone (it would only fence it again).
    expect(l.unlinked(['/c1', '/c2'])).toEqual([]);
    await new Promise((r) => setTimeout(r, 1_300));
    expect(tries.filter((t) => t === '/c1')).toHaveLength(3);
    // /c2 linked again (alive after all) between tries: no more tries.
    void l.hold('/c2', new AbortController().signal);
    const c2Tries = tries.filter((t) => t === '/c2').length;
    await new Promise((r) => setTimeout(r, 700));
    expect(tries.filter((t) => t === '/c2')).toHaveLength(c2Tries);
    expect(tries.filter((t) => t === '/c1')).toHaveLength(3);
    expect(l.fenced).toBe(2);
    l.close();
  });

  it("fences a session could not finish are the next session's: carried out there unless the compactor links first", async () => {
    // The session before: /c1's delete fails (no quorum), /c2's link closed and is still in its grace,
    // /c3 is linked; then the session ends.
    const held = new Set(['/c1', '/c2', '/c3']);
    const before = new CompactorLinks({
      holds: (c) => held.has(c),
      deleteNode: async (c) => {
        throw new ExcError('ZK_SESSION_LOST', `zookeeper delete ${c}: session lost`);
      },
      graceMs: GRACE_MS,
      log: silentLogger(),
    });
    const closeC1 = new AbortController();
    void before.hold('/c1', closeC1.signal);
    closeC1.abort();
    await settle(); // /c1 fenced, and its delete failed
    const closeC2 = new AbortController();
    void before.hold('/c2', closeC2.signal);
    closeC2.abort();
    void before.hold('/c3', new AbortController().signal);
    const unfinished = before.unfinished();
    before.close();
    expect(unfinished.map((f) => f.compactor).sort()).toEqual(['/c1', '/c2']);
    for (const f of unfinished) expect(f.linkClosedAt).toBeGreaterThan(0);

    // The next session holds nothing yet (its tablets are not loaded): it fences both, except that /c2
    // links to it within the grace (alive after all), and reports /c1's death from its link's end.
    const deleted: string[] = [];
    const after = new CompactorLinks({
      holds: () => false,
      deleteNode: async (c) => {
        deleted.push(c);
      },
      graceMs: GRACE_MS,
      log: silentLogger(),
    });
    after.takeOver(unfinished);
    void after.hold('/c2', new AbortController().signal);
    await settle();
    expect(deleted).toEqual(['/c1']);
    expect(after.linkClosedAt('/c1')).toBe(unfinished.find((f) => f.compactor === '/c1')!.linkClosedAt);
    after.close();
  });
});
