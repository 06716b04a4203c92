/**
 * How the local store reports a failed file system call (local.ts): by the object's key and a stable
 * code, never the system's message, which holds the absolute path on this host.
 */
import { ExcError } from '../errors.js';

export function isMissing(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** Conditions that can clear up by themselves: a full disk, too many open files, an I/O hiccup. */
const TRANSIENT_FS = new Set(['ENOSPC', 'EMFILE', 'ENFILE', 'EAGAIN', 'EBUSY', 'EIO', 'EDQUOT']);

/**
 * The error of a failed file system call, naming the object by its key. Not the system's message: it
 * holds the absolute path on this host, which answers to clients must not show (the cause keeps it for
 * the logs).
 */
export function fsError(err: unknown, op: string, name: string): ExcError {
  if (err instanceof ExcError) return err;
  const code = (err as { code?: string } | null)?.code ?? 'unknown';
  const message = `local store: ${op} ${name} failed (${code})`;
  return new ExcError(TRANSIENT_FS.has(code) ? 'STORE_UNAVAILABLE' : 'INTERNAL', message, {
    cause: err,
    details: { name, code },
  });
}

export async function fsCall<T>(fn: () => Promise<T>, op: string, name: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isMissing(err) && op === 'read') {
      throw new ExcError('OBJECT_NOT_FOUND', `no object ${name}`, { details: { name } });
    }
    throw fsError(err, op, name);
  }
}
