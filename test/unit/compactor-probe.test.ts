/**
 * The tablet server's question to a compactor that holds reservations here without a link
 * (compactor-probe.ts): only a refused connection or another registration's answer fences it.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { pino } from 'pino';
import { askable, CompactorProbe, refused } from '../../src/tserver/compactor-probe.js';

const C = '/excompact/queues/q/c-0000000007';
const log = pino({ level: 'silent' });

/** A connection error as the RPC client gives it: an ExcError whose cause carries the socket's code. */
function transport(code: string): ExcError {
  const cause = Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code });
  return new ExcError('UNAVAILABLE', `GET http://127.0.0.1:9/status: ${cause.message}`, {
    cause: Object.assign(new Error(cause.message), { code, cause }),
  });
}

/** One probe round against a compactor whose status call gives `answer`; the fences it made. */
async function fencesAfter(answer: () => Promise<unknown>): Promise<string[]> {
  const fenced: string[] = [];
  let asked = 0;
  const probe = new CompactorProbe({
    unlinked: () => [C],
    addressOf: () => ({ status: 'http://127.0.0.1:9', host: 'here' }),
    ask: () => {
      asked++;
      return answer();
    },
    fence: (_c, why) => fenced.push(why),
    everyMs: 5,
    log,
    here: 'here',
  });
  probe.start();
  while (asked < 3) await new Promise((r) => setTimeout(r, 5));
  probe.stop();
  await new Promise((r) => setTimeout(r, 10));
  return fenced;
}

describe('compactor probe', () => {
  it('fences on a refused connection and on an answer from another registration, and on nothing else', async () => {
    expect(await fencesAfter(() => Promise.reject(transport('ECONNREFUSED')))).toContain(
      'nothing listens at its address http://127.0.0.1:9',
    );
    expect(await fencesAfter(() => Promise.resolve({ compactor: `${C.slice(0, -1)}8` }))).toContain(
      `its address http://127.0.0.1:9 answers as ${C.slice(0, -1)}8`,
    );
    // Alive, starting up (no registration yet), reset, timed out, unresolvable: nothing proven.
    expect(await fencesAfter(() => Promise.resolve({ compactor: C }))).toEqual([]);
    expect(await fencesAfter(() => Promise.resolve({ compactor: null }))).toEqual([]);
    expect(await fencesAfter(() => Promise.reject(transport('ECONNRESET')))).toEqual([]);
    expect(
      await fencesAfter(() => Promise.reject(new ExcError('TIMEOUT', 'no answer within 1000 ms'))),
    ).toEqual([]);
    expect(await fencesAfter(() => Promise.reject(transport('ENOTFOUND')))).toEqual([]);
  });

  it('asks one question at a time per compactor', async () => {
    let open = 0;
    let most = 0;
    let asked = 0;
    const probe = new CompactorProbe({
      unlinked: () => [C],
      addressOf: () => ({ status: 'http://10.0.0.7:9', host: 'elsewhere' }),
      ask: async () => {
        asked++;
        most = Math.max(most, ++open);
        await new Promise((r) => setTimeout(r, 30));
        open--;
        return { compactor: C };
      },
      fence: () => undefined,
      everyMs: 2,
      log,
    });
    probe.start();
    while (asked < 3) await new Promise((r) => setTimeout(r, 5));
    probe.stop();
    expect(most).toBe(1);
  });

  it('asks a loopback address only from the host the compactor registered from', () => {
    expect(askable({ status: 'http://127.0.0.1:4000', host: 'a' }, 'a')).toBe(true);
    expect(askable({ status: 'http://127.0.0.1:4000', host: 'a' }, 'b')).toBe(false);
    expect(askable({ status: 'http://localhost:4000', host: 'a' }, 'b')).toBe(false);
    expect(askable({ status: 'http://[::1]:4000', host: 'a' }, 'b')).toBe(false);
    expect(askable({ status: 'http://10.1.2.3:4000', host: 'a' }, 'b')).toBe(true);
    expect(askable({ status: 'http://compactor-7.svc:4000', host: 'a' }, 'b')).toBe(true);
    expect(askable({ status: 'not a url', host: 'a' }, 'a')).toBe(false);
  });

  it('reads a refusal through the causes of the error', () => {
    expect(refused(transport('ECONNREFUSED'))).toBe(true);
    expect(refused(transport('ECONNRESET'))).toBe(false);
    expect(refused(new Error('x'))).toBe(false);
    expect(refused(undefined)).toBe(false);
  });
});
