/**
 * One error model for the whole project.
 *
 * Every failure that crosses a module boundary is an {@link ExcError} with a stable `code`. The code decides
 * the HTTP status an RPC answers with and whether a caller may retry. Classification happens once, here:
 * callers ask {@link isRetriable} instead of inspecting messages.
 */

interface CodeInfo {
  /** HTTP status used when the error is the answer to an RPC. */
  readonly status: number;
  /** Whether repeating the same request later may succeed. */
  readonly retriable: boolean;
}

/** Stable error codes. Clients and tests match on these, never on messages. */
export const ERROR_CODES = {
  // Request and protocol errors.
  BAD_REQUEST: { status: 400, retriable: false },
  UNAUTHENTICATED: { status: 401, retriable: false },
  FORBIDDEN: { status: 403, retriable: false },
  NOT_FOUND: { status: 404, retriable: false },
  METHOD_NOT_ALLOWED: { status: 405, retriable: false },
  CONFLICT: { status: 409, retriable: false },
  ALREADY_EXISTS: { status: 409, retriable: false },
  PAYLOAD_TOO_LARGE: { status: 413, retriable: false },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, retriable: false },
  /** A signed request's body is not the one its signature covers (x-exc-content-sha256). */
  CONTENT_HASH_MISMATCH: { status: 400, retriable: false },
  TOO_MANY_REQUESTS: { status: 429, retriable: true },
  INTERNAL: { status: 500, retriable: false },
  UNAVAILABLE: { status: 503, retriable: true },
  TIMEOUT: { status: 504, retriable: true },
  SHUTTING_DOWN: { status: 503, retriable: true },

  // Configuration.
  CONFIG_INVALID: { status: 500, retriable: false },
  SETUP_MISSING: { status: 500, retriable: false },

  // ZooKeeper. Connection loss and timeouts are retriable within a live session; a lost session is final
  // for that session (the owner must rebuild everything it held); the others are answers, not failures.
  ZK_CONNECTION_LOSS: { status: 503, retriable: true },
  ZK_TIMEOUT: { status: 503, retriable: true },
  ZK_SESSION_LOST: { status: 503, retriable: false },
  ZK_NO_NODE: { status: 404, retriable: false },
  ZK_NODE_EXISTS: { status: 409, retriable: false },
  ZK_BAD_VERSION: { status: 409, retriable: false },
  ZK_NOT_EMPTY: { status: 409, retriable: false },
  ZK_NO_AUTH: { status: 403, retriable: false },
  ZK_ERROR: { status: 500, retriable: false },

  // Storage (sorted files and object stores).
  CORRUPT_FILE: { status: 422, retriable: false },
  OBJECT_NOT_FOUND: { status: 404, retriable: false },
  INVALID_NAME: { status: 400, retriable: false },
  STORE_UNAVAILABLE: { status: 503, retriable: true },
  /** The backend cannot do this at all (an S3-compatible server without an API): not a failure to retry. */
  NOT_SUPPORTED: { status: 501, retriable: false },

  // Metadata store and the manager.
  CONDITION_FAILED: { status: 409, retriable: false },
  UNKNOWN_TABLE: { status: 404, retriable: false },
  /** The table was taken offline (`admin table offline`): nothing reads or writes it until it is online. */
  TABLE_OFFLINE: { status: 409, retriable: false },
  NOT_MANAGER: { status: 503, retriable: true },
  /** A tablet server's mutation named a ZooKeeper session that is no longer live. */
  FENCED: { status: 409, retriable: false },

  // Tablet servers, queues and reservations.
  NOT_SERVING: { status: 409, retriable: false },
  /**
   * The tablet a request named does not hold the rows it was sent for any more (it split or merged): the
   * caller looks the table's tablets up again and sends each row where it is now.
   */
  TABLET_CHANGED: { status: 409, retriable: false },
  UNKNOWN_QUEUE: { status: 404, retriable: false },
  NO_WORK: { status: 404, retriable: false },
  RESERVATION_GONE: { status: 409, retriable: false },
  COMPACTOR_GONE: { status: 409, retriable: false },
  /**
   * A bulk import waits for a compaction of the tablet that drops delete markers (tserver/import-rules.ts):
   * sent again, it is applied once the compaction ended.
   */
  IMPORT_WAITING: { status: 409, retriable: true },
  /** A change was sent but not confirmed (its answer was lost); it may or may not have been applied. */
  OUTCOME_UNKNOWN: { status: 503, retriable: true },
} as const satisfies Record<string, CodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, value);
}

/** Identifiers that help diagnose a failure: tablet, znode path, object key, reservation id, field... */
export type ErrorDetails = Record<string, string | number | boolean | null | undefined | string[]>;

export class ExcError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: ErrorDetails } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ExcError';
    this.code = code;
    this.details = options.details ?? {};
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  get retriable(): boolean {
    return ERROR_CODES[this.code].retriable;
  }
}

/** Network-level failures of an outgoing request: the peer may be restarting, trying again makes sense. */
const RETRIABLE_SYSTEM_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/**
 * Whether an operation that failed with `err` may be retried. A `TypeError` or any other programming error
 * is never retried: it would fail the same way again.
 */
export function isRetriable(err: unknown): boolean {
  if (err instanceof ExcError) return err.retriable;
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRIABLE_SYSTEM_CODES.has(code);
}

/** The error as an ExcError, wrapping anything else as INTERNAL (keeping it as `cause`). */
export function toExcError(err: unknown): ExcError {
  if (err instanceof ExcError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ExcError(isRetriable(err) ? 'UNAVAILABLE' : 'INTERNAL', message, { cause: err });
}

/** A short, loggable description of any thrown value. */
export function describeError(err: unknown): string {
  if (err instanceof ExcError) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
