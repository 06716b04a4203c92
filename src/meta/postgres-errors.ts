/**
 * What a failure of the PostgreSQL metadata store (postgres.ts) means to its callers, as one stable code.
 */
import { ExcError } from '../errors.js';

/** A database that cannot be reached or refused a statement: UNAVAILABLE (worth another try) or INTERNAL. */
export function storeError(err: unknown, where: string): ExcError {
  if (err instanceof ExcError) return err;
  const code = (err as { code?: unknown }).code;
  const message = `the metadata store at ${where} failed: ${(err as Error).message}`;
  // Connection errors (no SQLSTATE, or class 08: connection exception; 57P: operator intervention).
  const transient = typeof code !== 'string' || /^(08|57P|53)/.test(code) || code.startsWith('E');
  return new ExcError(transient ? 'UNAVAILABLE' : 'INTERNAL', message, { cause: err });
}
