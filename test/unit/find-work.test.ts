/**
 * The compactor's reserve (src/compactor/find-work.ts): a reserve whose outcome is unknown is repeated
 * under the same request id (the tablet server answers a repeat with the reservation it made), on the
 * tablet's current host when its host failed or gave it away; misses are null, and a tablet server that
 * cannot see the compactor's node says so.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { COL_LOC, locationValue } from '../../src/meta/tablet.js';
import type { PeerClients } from '../../src/rpc/peers.js';
import { reserve } from '../../src/compactor/find-work.js';

type Answer = ExcError | { job: unknown };

/** Tablet servers by name, each answering its queue of answers in turn; every request is recorded. */
function peers(answers: Record<string, Answer[]>): {
  peers: PeerClients;
  sent: { host: string; body: unknown }[];
} {
  const sent: { host: string; body: unknown }[] = [];
  const client = (host: string) => ({
    post: async (_path: string, body: unknown) => {
      sent.push({ host, body });
      const next = answers[host]?.shift();
      if (next === undefined) throw new Error(`no answer left for ${host}`);
      if (next instanceof ExcError) throw next;
      return next;
    },
  });
  return { peers: { get: client } as unknown as PeerClients, sent };
}

/** The metadata store's view of where the tablet is: `hosts` in turn, the last one from then on. */
function meta(...hosts: (string | null)[]) {
  return {
    row: async () => {
      const host = hosts.length > 1 ? hosts.shift()! : hosts[0]!;
      return new Map(host ? [[COL_LOC, locationValue({ server: host, session: '0123456789abcdef' })]] : []);
    },
  };
}

const request = { tablet: '0001<', queueId: 'abcd', compactor: '/x/compactors/abcd/c-1' };
const signal = new AbortController().signal;
const follow = { followMs: 10_000 };
const timeout = () => new ExcError('TIMEOUT', 'no answer within 10000 ms', { details: { sent: true } });
const refused = () => new ExcError('UNAVAILABLE', 'ECONNREFUSED', { details: { sent: false } });

describe('compactor reserve', () => {
  it('an unknown outcome is asked again under the same request id, and the reservation it made comes back', async () => {
    const job = { ecid: 'E1' };
    const { peers: p, sent } = peers({
      'ts:1': [new ExcError('OUTCOME_UNKNOWN', 'tablet changed behind its copy'), { job }],
    });
    expect(await reserve(p, meta('ts:1'), 'ts:1', request, signal, follow)).toEqual({ job, server: 'ts:1' });
    expect(sent).toHaveLength(2);
    expect(sent[0]!.body).toEqual(sent[1]!.body);
    expect((sent[0]!.body as { requestId: string }).requestId).toMatch(/^[0-9A-Z]{26}$/);
  });

  it('host died after the request: repeated on the host the tablet moved to, which answers with the reservation', async () => {
    const job = { ecid: 'E1' };
    // ts:1 took the request and died before answering; until its tablets are reassigned the store still
    // names it, then ts:2.
    const { peers: p, sent } = peers({ 'ts:1': [timeout(), refused(), refused()], 'ts:2': [{ job }] });
    const got = await reserve(p, meta('ts:1', 'ts:1', 'ts:2'), 'ts:1', request, signal, follow);
    expect(got).toEqual({ job, server: 'ts:2' });
    expect(sent.map((s) => s.host)).toEqual(['ts:1', 'ts:1', 'ts:1', 'ts:2']);
    expect(new Set(sent.map((s) => (s.body as { requestId: string }).requestId)).size).toBe(1);
  });

  it('a request that may have been applied is followed for followMs at most, then it is a miss', async () => {
    const { peers: p, sent } = peers({ 'ts:1': Array.from({ length: 100 }, timeout) });
    const started = Date.now();
    expect(await reserve(p, meta('ts:1'), 'ts:1', request, signal, { followMs: 300 })).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(sent.length).toBeGreaterThan(1);
  });

  it('misses are null at once when nothing was applied, a node the tablet server cannot see is "gone", anything else is thrown', async () => {
    const notServing = peers({ 'ts:1': [new ExcError('NOT_SERVING', 'moved')] });
    expect(await reserve(notServing.peers, meta('ts:2'), 'ts:1', request, signal, follow)).toBeNull();
    expect(notServing.sent).toHaveLength(1);
    // Down (never reached): a few quick repeats, then a miss; the store is not asked where it went.
    const down = peers({ 'ts:1': Array.from({ length: 6 }, refused) });
    expect(await reserve(down.peers, meta('ts:2'), 'ts:1', request, signal, follow)).toBeNull();
    expect(down.sent.map((s) => s.host)).toEqual(Array.from({ length: 6 }, () => 'ts:1'));
    expect(
      await reserve(peers({ 'ts:1': [{ job: null }] }).peers, meta('ts:1'), 'ts:1', request, signal, follow),
    ).toBeNull();
    expect(
      await reserve(
        peers({ 'ts:1': [new ExcError('COMPACTOR_GONE', 'no node')] }).peers,
        meta('ts:1'),
        'ts:1',
        request,
        signal,
        follow,
      ),
    ).toBe('gone');
    await expect(
      reserve(
        peers({ 'ts:1': [new ExcError('BAD_REQUEST', 'wrong queue')] }).peers,
        meta('ts:1'),
        'ts:1',
        request,
        signal,
        follow,
      ),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});
