/**
 * The answer to a request Node's HTTP parser refuses before any route sees it (a malformed request line,
 * headers too large, a request that never finished): the same JSON error body every other refusal has,
 * with a stable code, instead of Node's bare `400 Bad Request`. The connection is closed after it, since
 * the parser cannot find where the next request would start.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

interface ParserError extends Error {
  code?: string;
}

/** What each parser failure is answered with; anything else is a 400. */
const ANSWERS: Record<string, { status: number; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, code: 'BAD_REQUEST', message: 'request headers too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: 'TIMEOUT', message: 'request not completed in time' },
  HPE_HEADERS_TIMEOUT: { status: 408, code: 'TIMEOUT', message: 'request headers not completed in time' },
};

/** The raw HTTP response for a parser failure, or undefined when nothing should be written. */
export function clientErrorResponse(err: ParserError): string | undefined {
  // The peer went away: there is nobody to answer.
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE') return undefined;
  const answer = ANSWERS[err.code ?? ''] ?? {
    status: 400,
    code: 'BAD_REQUEST',
    message: `malformed HTTP request (${err.code ?? 'parse error'})`,
  };
  const body = JSON.stringify({ error: { code: answer.code, message: answer.message } });
  return (
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n` +
    'content-type: application/json; charset=utf-8\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    'connection: close\r\n\r\n' +
    body
  );
}

/** A `clientError` listener for an http.Server. */
export function answerClientError(err: ParserError, socket: Duplex): void {
  const response = clientErrorResponse(err);
  if (response === undefined || !socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(response);
}
