/**
 * Request authentication with the instance secret.
 *
 * Every request carries
 *   x-exc-date:           milliseconds since the epoch, when it was signed
 *   x-exc-nonce:          16 random bytes, base64url
 *   x-exc-content-sha256: hex SHA-256 of the body (of no bytes when there is none)
 *   authorization:        EXC-HMAC-SHA256 <hex HMAC-SHA256 over the canonical request>
 * where the canonical request is
 *   METHOD "\n" host "\n" path-and-query "\n" date "\n" nonce "\n" content-sha256
 * (host: the Host header, `host:port` of the server as the client addressed it) and the HMAC key is
 * derived from the secret (the secret itself never crosses the wire).
 *
 * The signature covers the body through its declared hash, as S3's SigV4 does with
 * `x-amz-content-sha256`: the server checks the signature from the headers alone, before it reads a byte
 * of the body, so an unsigned or badly signed request is refused without being buffered; it then hashes
 * the body as it streams in and refuses it when it does not match (server.ts).
 *
 * The server accepts a request only if the MAC matches, the date is within ±maxSkew of its clock, the
 * nonce was not seen before within the window, and the signed Host names its own port: a captured request
 * cannot be replayed, neither inside the window (nonce) nor after it (date), nor to another process of the
 * instance on another port (each remembers only its own nonces), such as the tablet server that took over
 * a tablet a manager's unload named.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { randomPooled } from '../ids.js';
import { ExcError } from '../errors.js';

export const AUTH_SCHEME = 'EXC-HMAC-SHA256';
export const DATE_HEADER = 'x-exc-date';
export const NONCE_HEADER = 'x-exc-nonce';
export const CONTENT_HASH_HEADER = 'x-exc-content-sha256';

/** Hex SHA-256 of a body (of no bytes when there is none): the value of {@link CONTENT_HASH_HEADER}. */
export function bodyHash(body: Buffer | undefined): string {
  return createHash('sha256')
    .update(body ?? Buffer.alloc(0))
    .digest('hex');
}

/** The RPC signing key of an instance. */
export function rpcKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('excompact/rpc/v1').digest();
}

export interface SignInput {
  method: string;
  /** The Host header the request carries: the server's `host:port` as the client addresses it. */
  host: string;
  /** Path and query, exactly as sent. */
  path: string;
  body?: Buffer;
  now?: number;
  nonce?: string;
}

function canonical(
  method: string,
  host: string,
  path: string,
  date: string,
  nonce: string,
  contentHash: string,
): string {
  return `${method.toUpperCase()}\n${host}\n${path}\n${date}\n${nonce}\n${contentHash}`;
}

function mac(key: Buffer, text: string): string {
  return createHmac('sha256', key).update(text).digest('hex');
}

/** Headers that authenticate one request. Sign again for every attempt: nonces are single-use. */
export function signRequest(key: Buffer, input: SignInput): Record<string, string> {
  const date = String(input.now ?? Date.now());
  const nonce = input.nonce ?? randomPooled(16).toString('base64url');
  const contentHash = bodyHash(input.body);
  return {
    [DATE_HEADER]: date,
    [NONCE_HEADER]: nonce,
    [CONTENT_HASH_HEADER]: contentHash,
    authorization: `${AUTH_SCHEME} ${mac(key, canonical(input.method, input.host, input.path, date, nonce, contentHash))}`,
  };
}

/** A request as far as its headers: what is checked before its body is read. */
export interface VerifyInput {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface VerifierOptions {
  maxSkewMs: number;
  now?: () => number;
  /**
   * The ports this server is reached on (undefined: not yet known, no check): the signed Host must name
   * one of them.
   */
  ports?: () => readonly number[] | undefined;
}

export class RequestVerifier {
  private readonly key: Buffer;
  private readonly maxSkewMs: number;
  private readonly now: () => number;
  private readonly ports: () => readonly number[] | undefined;
  /** nonce → time after which it can be forgotten (the request's date is then out of the window). */
  private readonly seen = new Map<string, number>();

  constructor(key: Buffer, options: VerifierOptions) {
    this.key = key;
    this.maxSkewMs = options.maxSkewMs;
    this.now = options.now ?? Date.now;
    this.ports = options.ports ?? (() => undefined);
  }

  /**
   * Checks a request's headers: throws UNAUTHENTICATED with the reason when the request is not properly
   * signed, fresh and new. Resolves with the body hash the signature covers; the caller must refuse a
   * body that does not match it (server.ts reads the body only after this).
   */
  verify(input: VerifyInput): string {
    const auth = header(input.headers, 'authorization');
    const date = header(input.headers, DATE_HEADER);
    const nonce = header(input.headers, NONCE_HEADER);
    const contentHash = header(input.headers, CONTENT_HASH_HEADER);
    const host = header(input.headers, 'host') ?? '';
    if (!auth || !date || !nonce || !contentHash) {
      const missing = !auth
        ? 'authorization'
        : !date
          ? DATE_HEADER
          : !nonce
            ? NONCE_HEADER
            : CONTENT_HASH_HEADER;
      throw unauthenticated(`missing ${missing} header`);
    }
    const [scheme, given] = auth.split(' ');
    if (scheme !== AUTH_SCHEME || !given || !/^[0-9a-f]{64}$/.test(given)) {
      throw unauthenticated(`authorization must be '${AUTH_SCHEME} <hex signature>'`);
    }
    if (!/^\d{1,16}$/.test(date) || !/^[\w-]{16,64}$/.test(nonce))
      throw unauthenticated('malformed date or nonce');
    if (!/^[0-9a-f]{64}$/.test(contentHash))
      throw unauthenticated(`${CONTENT_HASH_HEADER} must be the hex SHA-256 of the body`);
    const expected = mac(this.key, canonical(input.method, host, input.path, date, nonce, contentHash));
    if (!timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(given, 'hex'))) {
      throw unauthenticated('bad signature');
    }
    const ports = this.ports();
    const signedFor = portOf(host);
    if (ports !== undefined && (signedFor === undefined || !ports.includes(signedFor))) {
      throw unauthenticated(
        `request signed for another server (${host}), not this one (port ${ports.join(' or ')})`,
      );
    }
    const now = this.now();
    const signedAt = Number(date);
    if (Math.abs(now - signedAt) > this.maxSkewMs) {
      throw unauthenticated(`request date is outside the ${this.maxSkewMs} ms freshness window`);
    }
    this.forgetExpired(now);
    if (this.seen.has(nonce)) throw unauthenticated('replayed request (nonce already used)');
    this.seen.set(nonce, signedAt + this.maxSkewMs);
    return contentHash;
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

/** The port a Host header names (`host:port`, `[v6]:port`); undefined without one. */
function portOf(host: string): number | undefined {
  const m = /:(\d{1,5})$/.exec(host);
  return m ? Number(m[1]) : undefined;
}
