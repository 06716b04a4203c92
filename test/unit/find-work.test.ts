/**
 * The compactor's reserve (src/compactor/find-work.ts): a reserve whose outcome is unknown is repeated
 * under the same request id (the tablet server answers a repeat with the reservation it made), misses are
 * null, and a tablet server that cannot see the compactor's node says so.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import type { PeerClients } from '../../src/rpc/peers.js';
import { reserve } from '../../src/compactor/find-work.js';

function peers(answers: (ExcError | { job: unknown })[]): { peers: PeerClients; bodies: unknown[] } {
  const bodies: unknown[] = [];
  const client = {
    post: async (_path: string, body: unknown) => {
      bodies.push(body);
      const next = answers.shift();
      if (next instanceof ExcError) throw next;
      return next;
    },
  };
  return { peers: { get: () => client } as unknown as PeerClients, bodies };
}

const request = { tablet: '0001<', queueId: 'abcd', compactor: '/x/compactors/abcd/c-1' };

describe('compactor reserve', () => {
  it('an unknown outcome is asked again under the same request id, and the reservation it made comes back', async () => {
    const job = { ecid: 'E1' };
    const { peers: p, bodies } = peers([
      new ExcError('OUTCOME_UNKNOWN', 'tablet changed behind its copy'),
      { job },
    ]);
    expect(await reserve(p, 'ts:1', request, new AbortController().signal)).toBe(job);
    expect(bodies).toHaveLength(2);
    expect(bodies[0]).toEqual(bodies[1]);
    expect((bodies[0] as { requestId: string }).requestId).toMatch(/^[0-9A-Z]{26}$/);
  });

  it('misses are null, a node the tablet server cannot see is "gone", anything else is thrown', async () => {
    const signal = new AbortController().signal;
    const unknown = () => new ExcError('OUTCOME_UNKNOWN', 'x');
    expect(await reserve(peers([unknown(), unknown(), unknown()]).peers, 'ts:1', request, signal)).toBeNull();
    expect(
      await reserve(peers([new ExcError('NOT_SERVING', 'moved')]).peers, 'ts:1', request, signal),
    ).toBeNull();
    expect(await reserve(peers([{ job: null }]).peers, 'ts:1', request, signal)).toBeNull();
    expect(
      await reserve(peers([new ExcError('COMPACTOR_GONE', 'no node')]).peers, 'ts:1', request, signal),
    ).toBe('gone');
    await expect(
      reserve(peers([new ExcError('BAD_REQUEST', 'wrong queue')]).peers, 'ts:1', request, signal),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});
