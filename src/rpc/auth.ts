/**
 * Request authentication with the instance secret.
 *
 * Every request carries
 *   x-exc-date:    milliseconds since the epoch, when it was signed
 *   x-exc-nonce:   16 random bytes, base64url
 *   authorization: EXC-HMAC-SHA256 <hex HMAC-SHA256 over the canonical request>
 * where the canonical request is
 *   METHOD "\n" path-and-query "\n" date "\n" nonce "\n" hex(SHA-256(body))
 * and the HMAC key is derived from the secret (the secret itself never crosses the wire).
 *
 * The server accepts a request only if the MAC matches, the date is within ±maxSkew of its clock, and the
 * nonce was not seen before within the window: a captured request cannot be replayed, neither inside the
 * window (nonce) nor after it (date).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { randomPooled } from '../ids.js';
import { ExcError } from '../errors.js';

export const AUTH_SCHEME = 'EXC-HMAC-SHA256';
export const DATE_HEADER = 'x-exc-date';
export const NONCE_HEADER = 'x-exc-nonce';

const EMPTY_BODY_HASH = createHash('sha256').digest('hex');

/** The RPC signing key of an instance. */
export function rpcKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('excompact/rpc/v1').digest();
}

export interface SignInput {
  method: string;
  /** Path and query, exactly as sent. */
  path: string;
  body?: Buffer;
  now?: number;
  nonce?: string;
}

function canonical(
  method: string,
  path: string,
  date: string,
  nonce: string,
  body: Buffer | undefined,
): string {
  const bodyHash =
    body && body.length > 0 ? createHash('sha256').update(body).digest('hex') : EMPTY_BODY_HASH;
  return `${method.toUpperCase()}\n${path}\n${date}\n${nonce}\n${bodyHash}`;
}

function mac(key: Buffer, text: string): string {
  return createHmac('sha256', key).update(text).digest('hex');
}

/** Headers that authenticate one request. Sign again for every attempt: nonces are single-use. */
export function signRequest(key: Buffer, input: SignInput): Record<string, string> {
  const date = String(input.now ?? Date.now());
  const nonce = input.nonce ?? randomPooled(16).toString('base64url');
  return {
    [DATE_HEADER]: date,
    [NONCE_HEADER]: nonce,
    authorization: `${AUTH_SCHEME} ${mac(key, canonical(input.method, input.path, date, nonce, input.body))}`,
  };
}

export interface VerifyInput {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body?: Buffer;
}

export interface VerifierOptions {
  maxSkewMs: number;
  now?: () => number;
}

export class RequestVerifier {
  private readonly key: Buffer;
  private readonly maxSkewMs: number;
  private readonly now: () => number;
  /** nonce → time after which it can be forgotten (the request's date is then out of the window). */
  private readonly seen = new Map<string, number>();

  constructor(key: Buffer, options: VerifierOptions) {
    this.key = key;
    this.maxSkewMs = options.maxSkewMs;
    this.now = options.now ?? Date.now;
  }

  /** Throws UNAUTHENTICATED with the reason when the request is not properly signed, fresh and new. */
  verify(input: VerifyInput): void {
    const auth = header(input.headers, 'authorization');
    const date = header(input.headers, DATE_HEADER);
    const nonce = header(input.headers, NONCE_HEADER);
    if (!auth || !date || !nonce) {
      throw unauthenticated(`missing ${!auth ? 'authorization' : !date ? DATE_HEADER : NONCE_HEADER} header`);
    }
    const [scheme, given] = auth.split(' ');
    if (scheme !== AUTH_SCHEME || !given || !/^[0-9a-f]{64}$/.test(given)) {
      throw unauthenticated(`authorization must be '${AUTH_SCHEME} <hex signature>'`);
    }
    if (!/^\d{1,16}$/.test(date) || !/^[\w-]{16,64}$/.test(nonce))
      throw unauthenticated('malformed date or nonce');
    const expected = mac(this.key, canonical(input.method, input.path, date, nonce, input.body));
    if (!timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(given, 'hex'))) {
      throw unauthenticated('bad signature');
    }
    const now = this.now();
    const signedAt = Number(date);
    if (Math.abs(now - signedAt) > this.maxSkewMs) {
      throw unauthenticated(`request date is outside the ${this.maxSkewMs} ms freshness window`);
    }
    this.forgetExpired(now);
    if (this.seen.has(nonce)) throw unauthenticated('replayed request (nonce already used)');
    this.seen.set(nonce, signedAt + this.maxSkewMs);
  }

  /** Number of remembered nonces (for tests and metrics). */
  get rememberedNonces(): number {
    return this.seen.size;
  }

  private forgetExpired(now: number): void {
    // Insertion order is arrival order, close to date order: sweep from the oldest and stop at the first
    // nonce still inside the window. A stray out-of-order entry only lingers a little longer.
    for (const [nonce, expiry] of this.seen) {
      if (expiry >= now) break;
      this.seen.delete(nonce);
    }
  }
}

function header(headers: VerifyInput['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function unauthenticated(reason: string): ExcError {
  return new ExcError('UNAUTHENTICATED', `unauthenticated: ${reason}`);
}
