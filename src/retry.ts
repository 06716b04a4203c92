import { ExcError, isRetriable } from './errors.js';

export interface BackoffOptions {
  /** First delay, before jitter. Default 50 ms. */
  baseMs?: number;
  /** Largest delay, before jitter. Default 5 s. */
  maxMs?: number;
}

/**
 * "Full jitter" exponential backoff: a uniformly random delay in [0, min(max, base·2^attempt)].
 * Randomising the whole interval spreads out callers that failed together (a dead peer, a restart), so
 * they do not come back in lock step.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 50;
  const max = options.maxMs ?? 5_000;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt, 30));
  return Math.random() * ceiling;
}

export interface RetryOptions extends BackoffOptions {
  /** Total attempts, including the first. Default 5. */
  attempts?: number;
  /** Which failures to retry. Default: {@link isRetriable}. */
  retryOn?: (err: unknown) => boolean;
  /** Called before each wait, for logging. */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  signal?: AbortSignal;
}

/** Runs `fn` until it succeeds, a failure is not retriable, attempts run out or `signal` aborts. */
export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? 5;
  const retryOn = options.retryOn ?? isRetriable;
  for (let attempt = 0; ; attempt++) {
    options.signal?.throwIfAborted();
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt + 1 >= attempts || !retryOn(err)) throw err;
      const delay = backoffDelay(attempt, options);
      options.onRetry?.(err, attempt, delay);
      await sleep(delay, options.signal);
    }
  }
}

/** A promise that resolves after `ms`, or rejects with the abort reason when `signal` aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Races `promise` against a timer. On timeout it rejects with `makeError()` (default TIMEOUT); the
 * original promise keeps running, and its late result or rejection is ignored.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, makeError?: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(makeError ? makeError() : new ExcError('TIMEOUT', `timed out after ${ms} ms`)),
      ms,
    );
  });
  // A rejection that loses the race must not surface as an unhandled rejection.
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
