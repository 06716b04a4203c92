/**
 * The HTTP/JSON client every process uses: signs each attempt, puts a timeout on each, and retries
 * retriable failures with jittered exponential backoff.
 *
 * Retrying is safe only when repeating the request cannot apply it twice: a call is retried when it is
 * marked idempotent, when the connection was refused (nothing was sent), or when the server answered with
 * a retriable error code (it did not apply the request). A timeout of a non-idempotent call is not retried:
 * its outcome is unknown and the caller must find out.
 */
import { ExcError, isErrorCode, isRetriable, type ErrorCode } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { retry } from '../retry.js';
import { rpcKey, signRequest } from './auth.js';
import { exchange, HttpExchangeError, type HttpResponse } from './http.js';

export interface RpcClientOptions {
  /** e.g. `http://127.0.0.1:9100`. */
  baseUrl: string;
  secret: string;
  /** Per-attempt timeout (default 10 s). */
  timeoutMs?: number;
  /** Attempts including the first (default 4). */
  attempts?: number;
  /** Backoff base and ceiling (defaults 50 ms, 2 s). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  logger?: Logger;
}

export interface CallOptions {
  /** Safe to repeat (reads, or writes with their own deduplication). Default: true for GET. */
  idempotent?: boolean;
  timeoutMs?: number;
  attempts?: number;
  signal?: AbortSignal;
}

export class RpcClient {
  readonly baseUrl: string;
  private readonly key: Buffer;
  private readonly options: RpcClientOptions;
  private readonly log: Logger;

  constructor(options: RpcClientOptions) {
    this.options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.key = rpcKey(options.secret);
    this.log = (options.logger ?? silentLogger()).child({ component: 'rpc-client', peer: this.baseUrl });
  }

  get<T>(path: string, options?: CallOptions): Promise<T> {
    return this.call<T>('GET', path, undefined, options);
  }

  post<T>(path: string, body: unknown, options?: CallOptions): Promise<T> {
    return this.call<T>('POST', path, body, options);
  }

  /** Sends one request (retrying as described above); resolves with the parsed JSON answer. */
  async call<T>(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body), 'utf8');
    const idempotent = options.idempotent ?? method === 'GET';
    return retry((attempt) => this.attempt<T>(method, path, payload, options, attempt), {
      attempts: options.attempts ?? this.options.attempts ?? 4,
      baseMs: this.options.backoffBaseMs ?? 50,
      maxMs: this.options.backoffMaxMs ?? 2_000,
      signal: options.signal,
      retryOn: (err) => canRetry(err, idempotent),
      onRetry: (err, attempt, delayMs) =>
        this.log.debug({ method, path, attempt, delayMs, err: String(err) }, 'retrying request'),
    });
  }

  private async attempt<T>(
    method: string,
    path: string,
    payload: Buffer | undefined,
    options: CallOptions,
    _attempt: number,
  ): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs ?? 10_000;
    // Signed for this server: a captured request cannot be replayed to another (auth.ts).
    const base = new URL(this.baseUrl);
    const host = base.host;
    const headers: Record<string, string> = {
      host,
      ...signRequest(this.key, { method, host, path, body: payload }),
    };
    if (payload) headers['content-type'] = 'application/json';
    const signal = options.signal
      ? AbortSignal.any([options.signal, AbortSignal.timeout(timeoutMs)])
      : AbortSignal.timeout(timeoutMs);
    let response: HttpResponse;
    try {
      // The path as signed, after any the base URL has: not normalized on its way (see exchange).
      const sent = `${base.pathname.replace(/\/+$/, '')}${path}`;
      response = await exchange(this.baseUrl, { method, headers, body: payload, signal, path: sent });
    } catch (err) {
      throw transportError(err, method, `${this.baseUrl}${path}`, timeoutMs, options.signal);
    }
    const json = parseJson(response.text);
    if (response.statusCode >= 200 && response.statusCode < 300) return json as T;
    throw errorFromResponse(response.statusCode, json, response.text, method, path);
  }
}

/**
 * Codes with which a server says it did not apply the request (overloaded, starting, stopping). Handlers
 * must not answer them after a partial effect.
 */
const NOT_APPLIED_CODES = new Set<string>([
  'UNAVAILABLE',
  'SHUTTING_DOWN',
  'TOO_MANY_REQUESTS',
  'NOT_MANAGER',
]);

/** Whether a server answering with `code` says it did not apply the request (see NOT_APPLIED_CODES). */
export function isNotAppliedCode(code: string): boolean {
  return NOT_APPLIED_CODES.has(code);
}

/**
 * Whether a failed call certainly had no effect: the request never reached the server, or the server
 * answered with one of the codes it only gives before acting on a request.
 */
export function notApplied(err: unknown): boolean {
  return err instanceof ExcError && (err.details?.sent === false || err.details?.notApplied === true);
}

/** Whether a failed attempt may be repeated. */
function canRetry(err: unknown, idempotent: boolean): boolean {
  if (!isRetriable(err)) return false;
  return idempotent || notApplied(err);
}

function transportError(
  err: unknown,
  method: string,
  url: string,
  timeoutMs: number,
  userSignal?: AbortSignal,
): ExcError {
  // No connection was ever open for this attempt: nothing reached the peer.
  const unconnected = err instanceof HttpExchangeError && !err.connected;
  if (userSignal?.aborted) {
    return new ExcError('UNAVAILABLE', `${method} ${url}: aborted`, {
      cause: err,
      details: { sent: !unconnected },
    });
  }
  const name = (err as { name?: string } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    const what = unconnected ? 'no connection' : 'no answer';
    return new ExcError('TIMEOUT', `${method} ${url}: ${what} within ${timeoutMs} ms`, {
      cause: err,
      details: { sent: !unconnected },
    });
  }
  const code = (err as { code?: string } | null)?.code ?? '';
  const notSent = unconnected || code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
  const retriable = isRetriable(err);
  return new ExcError(
    retriable ? 'UNAVAILABLE' : 'INTERNAL',
    `${method} ${url}: ${(err as Error).message}${code ? ` (${code})` : ''}`,
    {
      cause: err,
      details: { sent: !notSent, url },
    },
  );
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function errorFromResponse(
  status: number,
  json: unknown,
  text: string,
  method: string,
  path: string,
): ExcError {
  const body = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const remoteCode = body?.code;
  const message =
    typeof body?.message === 'string'
      ? body.message
      : `${method} ${path}: HTTP ${status} ${text.slice(0, 200)}`;
  let code = isErrorCode(remoteCode) ? remoteCode : statusToCode(status);
  // An unknown code from a newer peer keeps its retriability from the status.
  if (!isErrorCode(remoteCode) && status >= 500 && status !== 500) code = 'UNAVAILABLE';
  return new ExcError(code, message, {
    details: {
      status,
      sent: true,
      notApplied: isErrorCode(remoteCode) && isNotAppliedCode(remoteCode),
      remoteCode: typeof remoteCode === 'string' ? remoteCode : null,
    },
  });
}

function statusToCode(status: number): ErrorCode {
  switch (status) {
    case 400:
      return 'BAD_REQUEST';
    case 401:
      return 'UNAUTHENTICATED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    case 413:
      return 'PAYLOAD_TOO_LARGE';
    case 429:
      return 'TOO_MANY_REQUESTS';
    case 503:
      return 'UNAVAILABLE';
    case 504:
      return 'TIMEOUT';
    default:
      return 'INTERNAL';
  }
}
