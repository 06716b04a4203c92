import { describeError } from '../../src/errors.js';

/**
 * Polls `probe` until it returns a truthy value; fails after `timeoutMs` naming what it waited for.
 * `what` may be a function: it is called at the timeout, so the message can say what was seen last.
 */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false>,
  what: string | (() => string),
  timeoutMs = 15_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}${lastError ? ` (last error: ${describeError(lastError)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
