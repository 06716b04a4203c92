/**
 * The HTTP/1.1 of s3-read-into.ts: a request's head as the SDK built it, a response's head, and where a
 * response's body ends (RFC 9112 §6.3): after Content-Length bytes, after the last chunk of a chunked
 * body, or when the connection ends. Body bytes are handed on as views of the bytes read (chunk
 * framing cut out), so that they stay in the memory they were read into.
 */
import type { HttpRequest } from '@smithy/types';

export interface BodyFraming {
  readonly kind: 'length' | 'chunked' | 'close';
  /** Body bytes still to come when known (a fixed length), else 0. */
  wanted(): number;
  /** Takes the next bytes read: hands the body's among them to `emit`; throws on a malformed body. */
  take(data: Buffer, emit: (piece: Buffer) => void): void;
  /** Whether the body is complete. */
  done(): boolean;
  /** Bytes read after the body's end (a server that sent more than it framed). */
  extra(): number;
}

export function fixedLength(length: number): BodyFraming {
  let remaining = length;
  let extra = 0;
  return {
    kind: 'length',
    wanted: () => remaining,
    take(data, emit) {
      const n = Math.min(remaining, data.length);
      if (n > 0) emit(data.subarray(0, n));
      remaining -= n;
      extra += data.length - n;
    },
    done: () => remaining === 0,
    extra: () => extra,
  };
}

export function untilClose(): BodyFraming {
  return {
    kind: 'close',
    wanted: () => 0,
    take(data, emit) {
      if (data.length > 0) emit(data);
    },
    done: () => false,
    extra: () => 0,
  };
}

/** A chunk-size line (hex, perhaps with extensions) or a trailer line is never longer than this. */
const LINE_LIMIT = 4096;

export function chunked(): BodyFraming {
  let state: 'size' | 'data' | 'data-end' | 'trailer' | 'done' = 'size';
  let line = '';
  let remaining = 0;
  let extra = 0;
  /** Appends to the current line; the line once its CRLF is in, with the bytes after it. */
  const readLine = (data: Buffer, at: number): { text: string; next: number } | null => {
    const lf = data.indexOf(10, at);
    line += data.toString('latin1', at, lf < 0 ? data.length : lf + 1);
    if (line.length > LINE_LIMIT) throw protocolError('a chunk line too long');
    if (lf < 0) return null;
    if (!line.endsWith('\r\n')) throw protocolError('a chunk line without CRLF');
    const text = line.slice(0, -2);
    line = '';
    return { text, next: lf + 1 };
  };
  return {
    kind: 'chunked',
    wanted: () => 0,
    take(data, emit) {
      let at = 0;
      while (at < data.length) {
        if (state === 'done') {
          extra += data.length - at;
          return;
        }
        if (state === 'data') {
          const n = Math.min(remaining, data.length - at);
          emit(data.subarray(at, at + n));
          at += n;
          remaining -= n;
          if (remaining === 0) state = 'data-end';
          continue;
        }
        const got = readLine(data, at);
        if (got === null) return;
        at = got.next;
        if (state === 'size') {
          const size = /^([0-9a-fA-F]{1,12})(?:[ \t]*;.*)?$/.exec(got.text);
          if (size === null) throw protocolError(`a chunk size ${JSON.stringify(got.text.slice(0, 40))}`);
          remaining = parseInt(size[1]!, 16);
          state = remaining === 0 ? 'trailer' : 'data';
        } else if (state === 'data-end') {
          if (got.text !== '') throw protocolError('a chunk longer than its size');
          state = 'size';
        } else if (got.text === '') {
          state = 'done'; // the empty line after the last chunk's trailers
        }
      }
    },
    done: () => state === 'done',
    extra: () => extra,
  };
}

export interface ParsedHead {
  statusCode: number;
  reason: string;
  headers: Record<string, string>;
  keepAlive: boolean;
  /** How long the server keeps the connection open while idle, when it says (`Keep-Alive: timeout=N`). */
  idleTimeoutMs?: number;
}

/** An HTTP/1.x response head: status line and header lines (names lower-cased, repeats joined). */
export function parseHead(text: string): ParsedHead {
  const lines = text.split('\r\n');
  const status = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]!);
  if (status === null)
    throw protocolError(`not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 80))}`);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw protocolError(`a malformed header line: ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const connection = (headers.connection ?? '').toLowerCase();
  const keepAlive = status[1] === '1' ? !connection.includes('close') : connection.includes('keep-alive');
  const timeout = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(headers['keep-alive'] ?? '');
  return {
    statusCode: Number(status[2]),
    reason: status[3] ?? '',
    headers,
    keepAlive,
    ...(timeout ? { idleTimeoutMs: Number(timeout[1]) * 1000 } : {}),
  };
}

export function framingOf(head: ParsedHead): BodyFraming {
  if (head.statusCode === 204 || head.statusCode === 304) return fixedLength(0);
  const te = head.headers['transfer-encoding'];
  if (te !== undefined && te.toLowerCase() !== 'identity') {
    if (te.toLowerCase() !== 'chunked') throw protocolError(`transfer-encoding ${te}`);
    return chunked();
  }
  const length = head.headers['content-length'];
  if (length === undefined) return untilClose();
  if (!/^\d{1,15}$/.test(length)) throw protocolError(`content-length ${JSON.stringify(length)}`);
  return fixedLength(Number(length));
}

/** The request line and headers, as the SDK built and signed them. */
export function requestHead(request: HttpRequest): string {
  // As Node's HTTP client checks them: a token for a name, no control character in a value or the path
  // (the head goes out as latin1, one byte per character).
  if (!PATH.test(request.path))
    throw new TypeError(`request path ${JSON.stringify(request.path)}: not sendable`);
  const query = queryString(request.query);
  let head = `${request.method} ${request.path}${query === '' ? '' : `?${query}`} HTTP/1.1\r\n`;
  let host = false;
  for (const [name, value] of Object.entries(request.headers)) {
    if (!TOKEN.test(name)) throw new TypeError(`header name ${JSON.stringify(name)}: not a token`);
    if (!FIELD_VALUE.test(value)) throw new TypeError(`header ${name}: a control character or a line break`);
    if (name.toLowerCase() === 'host') host = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!host) head += `host: ${request.hostname}${request.port ? `:${request.port}` : ''}\r\n`;
  return `${head}\r\n`;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const PATH = /^\/[\x21-\x7e\x80-\xff]*$/;

/** As the SDK's handler writes it: keys in order, each part escaped as in a signed URI. */
function queryString(query: HttpRequest['query']): string {
  const parts: string[] = [];
  for (const key of Object.keys(query ?? {}).sort()) {
    const value = query![key];
    const k = escape(key);
    if (Array.isArray(value)) for (const v of value) parts.push(`${k}=${escape(v)}`);
    else parts.push(value === null || value === undefined ? k : `${k}=${escape(value)}`);
  }
  return parts.join('&');
}

function escape(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function port(request: HttpRequest): number {
  return request.port ?? (request.protocol === 'https:' ? 443 : 80);
}

export function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { name: 'TimeoutError', code: 'ETIMEDOUT' });
}

export function connectionReset(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNRESET' });
}

export function protocolError(what: string): Error {
  // A garbled answer: worth another attempt on a fresh connection, as a dropped one is.
  return connectionReset(`S3 GetObject: the server sent ${what}`);
}
