/**
 * Object names: the only way a key reaches a local path or an S3 key, so the one place that decides
 * what may escape the store's root. The rule is an allow-list, not a deny-list: a name is
 * '/'-separated segments of `A-Z a-z 0-9 . _ - ~ = + , @`, no segment starts with '.', at most 1024
 * bytes. That refuses '..' and '.', absolute paths, backslashes, NUL and control characters, '%'
 * escapes and any other encoding trick by construction, and it keeps names that start with '.' free
 * for the local store's temporary files.
 */
import { ExcError } from '../errors.js';

export const MAX_NAME_LENGTH = 1024;

const SEGMENT = /^[A-Za-z0-9_~=+,@-][A-Za-z0-9._~=+,@-]*$/;

/** Returns `name` if it is a valid object name; throws INVALID_NAME naming it otherwise. */
export function checkName(name: unknown): string {
  if (typeof name !== 'string') throw invalid(name, 'not a string');
  const problem = nameProblem(name, false);
  if (problem) throw invalid(name, problem);
  return name;
}

/**
 * Whether `name` is a valid object name. For what a store finds rather than what a caller passes: a
 * listing skips keys that no operation would accept (an S3 console's `dir/` marker, a key with a space,
 * the local store's temporary files), so nothing listed fails when deleted or read.
 */
export function isValidName(name: string): boolean {
  return nameProblem(name, false) === null;
}

/**
 * Returns `prefix` if it is a valid listing prefix: empty, or a name, or a name followed by '/'. Its
 * last segment may be partial (`tables/1/F` lists `tables/1/F0001.rf`).
 */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string') throw invalid(prefix, 'not a string');
  if (prefix === '') return prefix;
  const problem = nameProblem(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix, true);
  if (problem) throw invalid(prefix, problem);
  return prefix;
}

function nameProblem(name: string, isPrefix: boolean): string | null {
  if (name.length === 0) return isPrefix ? 'empty segment' : 'empty name';
  if (name.length > MAX_NAME_LENGTH) return `longer than ${MAX_NAME_LENGTH} characters`;
  if (name.startsWith('/')) return 'absolute (starts with "/")';
  for (const segment of name.split('/')) {
    if (segment === '') return 'empty segment ("//" or trailing "/")';
    if (segment === '.' || segment === '..') return `"${segment}" segment`;
    if (segment.startsWith('.')) return 'segment starts with "."';
    if (!SEGMENT.test(segment))
      return `segment ${JSON.stringify(segment)} has a character outside [A-Za-z0-9._~=+,@-]`;
  }
  return null;
}

function invalid(name: unknown, why: string): ExcError {
  const shown =
    typeof name === 'string'
      ? JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name)
      : String(name);
  return new ExcError('INVALID_NAME', `invalid object name ${shown}: ${why}`, {
    details: { name: typeof name === 'string' ? name.slice(0, 200) : null },
  });
}

/** Checks an offset and length for a ranged read; throws BAD_REQUEST naming the object otherwise. */
export function checkRange(name: string, offset: number, length: number | undefined): void {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new ExcError('BAD_REQUEST', `bad offset ${offset} reading ${name}`, { details: { name } });
  }
  if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) {
    throw new ExcError('BAD_REQUEST', `bad length ${length} reading ${name}`, { details: { name } });
  }
}
