/**
 * Classification of S3 failures, in one place: which ones a retry may cure (throttling, 5xx, timeouts,
 * dropped connections) and what every other one means to a caller.
 */
import { ExcError, isRetriable } from '../errors.js';

interface S3ErrorShape {
  name?: unknown;
  Code?: unknown;
  message?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

/** Error names S3 (and S3-compatible servers) use for "slow down" and "try again". */
const TRANSIENT_NAMES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'BandwidthLimitExceeded',
  'RequestTimeout',
  'RequestTimeoutException',
  'InternalError',
  'ServiceUnavailable',
  // The SDK's socket timeouts.
  'TimeoutError',
]);

export function s3Status(err: unknown): number | undefined {
  const status = (err as S3ErrorShape | null)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

export function s3ErrorName(err: unknown): string {
  const e = err as S3ErrorShape | null;
  if (typeof e?.Code === 'string') return e.Code;
  return typeof e?.name === 'string' ? e.name : 'Error';
}

/** Whether repeating the request may succeed. A programming error (TypeError...) never is. */
export function isTransientS3Error(err: unknown): boolean {
  if (err instanceof ExcError) return err.retriable;
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return false;
  if (s3ErrorName(err) === 'AbortError') return false;
  if (isNotImplemented(err)) return false;
  const status = s3Status(err);
  if (status !== undefined && (status >= 500 || status === 429)) return true;
  if (TRANSIENT_NAMES.has(s3ErrorName(err))) return true;
  // Dropped and refused connections, socket hang-ups: the Node system error codes.
  return isRetriable(err);
}

/** The server has no such API (s3rver lacks ListMultipartUploads): a 5xx that no retry can cure. */
export function isNotImplemented(err: unknown): boolean {
  return s3ErrorName(err) === 'NotImplemented' || s3Status(err) === 501;
}

export function isNotFound(err: unknown): boolean {
  const name = s3ErrorName(err);
  if (name === 'NoSuchBucket') return false;
  return name === 'NoSuchKey' || name === 'NotFound' || s3Status(err) === 404;
}

/** The final error of an S3 operation on `object` (retries, if any, are over). */
export function s3Failure(
  err: unknown,
  op: string,
  object: string,
  name: string,
  attempts: number,
): ExcError {
  if (err instanceof ExcError) return err;
  const status = s3Status(err);
  const why = `${s3ErrorName(err)}: ${String((err as S3ErrorShape | null)?.message ?? err)}${status ? ` (HTTP ${status})` : ''}`;
  const details = { name, object, op, status: status ?? null };
  if (isNotFound(err))
    return new ExcError('OBJECT_NOT_FOUND', `no object ${object}`, { cause: err, details });
  if (isNotImplemented(err)) {
    return new ExcError('NOT_SUPPORTED', `S3 ${op} ${object}: the server does not implement it: ${why}`, {
      cause: err,
      details,
    });
  }
  if (isTransientS3Error(err)) {
    return new ExcError('STORE_UNAVAILABLE', `S3 ${op} ${object} failed after ${attempts} attempts: ${why}`, {
      cause: err,
      details,
    });
  }
  // Access denied, no such bucket, bad credentials: configuration, not weather. Retrying will not help.
  return new ExcError('INTERNAL', `S3 ${op} ${object} failed: ${why}`, { cause: err, details });
}
