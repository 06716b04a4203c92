/**
 * One connection of s3-read-into.ts, one exchange at a time: the request sent, the response's head
 * parsed, its body streamed, then idle until the next request to the same server.
 *
 * The socket reads (net/tls `onread`) into the connection's own small buffer for heads, and a 2xx
 * body not chunked into the caller's memory: each buffer `readInto` gives is filled by as many reads
 * as it takes (TLS hands over at most 16 KiB at a time) and handed out once full or once the body
 * ends; after that nothing is read into it again. Body bytes that came in the connection's own
 * buffer (with the head) are copied into the caller's memory; chunked and error bodies are copied out
 * of it. A connection that stops in the middle of a body is closed, never used again.
 */
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { HttpResponse } from '@smithy/types';
import {
  connectionReset,
  framingOf,
  parseHead,
  protocolError,
  timeoutError,
  type BodyFraming,
} from './s3-http1.js';

/** Memory for a body: a buffer of exactly `size` bytes, the caller's once handed out. */
export type ReadInto = (size: number) => Buffer;

export interface Exchange {
  /** The request's head, ready to send. */
  head: string;
  readInto: ReadInto;
  signal: AbortSignal | undefined;
  /** With the response once its head is in; its body streams on. */
  resolve(result: { response: HttpResponse }): void;
  reject(err: unknown): void;
  /**
   * On a connection that served requests before: the request is sent again on a new connection if
   * this one fails before any byte of the answer (the server had closed it while it was idle).
   */
  again: (() => void) | undefined;
}

/** The most asked of `readInto` at a time (the RFile reader's chunks). */
const READ_BYTES = 256 * 1024;
/** A connection's own buffer, for response heads. */
const OWN_BYTES = 16 * 1024;
/** A response head longer than this is not an S3 server's. */
const HEAD_LIMIT = 64 * 1024;
/**
 * An idle connection is closed after this long (servers close theirs after 5 s or more), or this margin
 * before the server said it closes it (`Keep-Alive: timeout=N`): a request sent as the server closes
 * the connection meets the close and must go again.
 */
const IDLE_MS = 4_000;
const IDLE_MARGIN_MS = 1_000;

export class Connection {
  private socket!: Socket;
  private readonly own = Buffer.allocUnsafeSlow(OWN_BYTES);
  private connected = false;
  private closed = false;
  /** Exchanges completed on this connection. */
  private served = 0;
  private exchange: Exchange | null = null;
  /** Whether any byte of the current exchange's answer came. */
  private heard = false;
  private phase: 'head' | 'body' = 'head';
  private headText = '';
  private framing: BodyFraming | null = null;
  private body: Readable | null = null;
  /** A 2xx body, not chunked: read into the caller's memory. */
  private intoCaller = false;
  /** The caller's buffer being filled, and how far. */
  private current: Buffer | null = null;
  private filled = 0;
  private keepAlive = false;
  /** How long this connection may wait idle for its next request (see IDLE_MS). */
  private idleMs = IDLE_MS;
  /** The body's consumer has enough: stop reading until it asks. */
  private full = false;
  private paused = false;
  private readonly onAbort = (): void => this.fail(abortError(this.exchange?.signal));
  /** Set while the connection waits in the idle list: takes it out. */
  onIdleEnd: (() => void) | null = null;

  constructor(
    readonly origin: string,
    private readonly socketTimeoutMs: number,
    private readonly release: (c: Connection) => void,
  ) {}

  attach(socket: Socket, connectionTimeoutMs: number, tls: boolean): void {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(connectionTimeoutMs);
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      this.connected = true;
      socket.setTimeout(this.socketTimeoutMs);
    });
    socket.on('timeout', () =>
      this.fail(
        this.connected
          ? timeoutError(`no data from ${this.origin} for ${this.socketTimeoutMs} ms`)
          : timeoutError(`could not connect to ${this.origin} within ${connectionTimeoutMs} ms`),
      ),
    );
    socket.on('error', (err) => this.fail(err));
    socket.on('end', () => this.ended());
    socket.on('close', () => this.fail(connectionReset(`${this.origin} closed the connection`)));
  }

  /** Sends a request; the exchange settles once the response's head is in. */
  start(exchange: Exchange): void {
    this.onIdleEnd?.();
    this.onIdleEnd = null;
    this.exchange = exchange;
    this.heard = false;
    this.phase = 'head';
    this.headText = '';
    this.socket.ref();
    if (this.connected) this.socket.setTimeout(this.socketTimeoutMs);
    exchange.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.socket.write(exchange.head, 'latin1');
    this.resume();
  }

  /** The memory the next read goes into: the rest of the caller's buffer for a body, else its own. */
  nextBuffer(): Buffer {
    if (this.exchange === null || this.phase !== 'body' || !this.intoCaller) return this.own;
    try {
      return this.callerMemory().subarray(this.filled);
    } catch (err) {
      this.fail(err);
      return this.own;
    }
  }

  /** A read of `n` bytes into `buf`; false pauses the socket. */
  received(buf: Buffer, n: number): boolean {
    if (this.exchange === null) {
      // Nothing was asked: a server that talks out of turn is not one to send requests to.
      this.close();
      return false;
    }
    this.heard = true;
    try {
      const data = buf.subarray(0, n);
      if (this.phase === 'head') return this.headBytes(data);
      return this.bodyBytes(data, buf.buffer === this.own.buffer);
    } catch (err) {
      this.fail(err);
      return false;
    }
  }

  resume(): void {
    if (!this.paused || this.closed) return;
    this.paused = false;
    this.socket.resume();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onIdleEnd?.();
    this.onIdleEnd = null;
    this.socket.destroy();
  }

  private headBytes(data: Buffer): boolean {
    const before = this.headText.length;
    this.headText += data.toString('latin1');
    const end = this.headText.indexOf('\r\n\r\n');
    if (end < 0) {
      if (this.headText.length > HEAD_LIMIT) throw protocolError(`a response head over ${HEAD_LIMIT} bytes`);
      return true;
    }
    const head = parseHead(this.headText.slice(0, end));
    const rest = data.subarray(end + 4 - before);
    if (head.statusCode >= 100 && head.statusCode < 200) {
      // An interim answer (100 Continue): the real one follows.
      this.headText = '';
      return rest.length === 0 ? true : this.headBytes(rest);
    }
    if (head.statusCode === 408 && this.served > 0 && this.exchange!.again !== undefined) {
      // A 408 on a connection that served before is the server closing it for idleness (RFC 9110
      // §15.5.9), sent as this request went out: not an answer to it. It goes again on a new
      // connection, as a request that meets an idle connection's close does (the 408 only came first).
      const again = this.exchange!.again;
      this.endExchange();
      this.close();
      again();
      return false;
    }
    this.framing = framingOf(head);
    this.intoCaller = head.statusCode >= 200 && head.statusCode < 300 && this.framing.kind !== 'chunked';
    // Both a length and a transfer coding: the coding wins (RFC 9112 §6.3), but such a server's next
    // answer is not to be trusted on the same connection.
    const ambiguous =
      head.headers['transfer-encoding'] !== undefined && head.headers['content-length'] !== undefined;
    this.idleMs =
      head.idleTimeoutMs === undefined ? IDLE_MS : Math.min(IDLE_MS, head.idleTimeoutMs - IDLE_MARGIN_MS);
    this.keepAlive = head.keepAlive && this.framing.kind !== 'close' && !ambiguous && this.idleMs > 0;
    this.phase = 'body';
    const body: Readable = new Readable({
      // One chunk per push, never merged into a new buffer by read().
      objectMode: true,
      highWaterMark: 1,
      read: () => this.resume(),
      destroy: (err, done) => {
        // The caller stopped reading before the end: the rest of the body is still coming.
        if (this.body === body) {
          this.endExchange();
          this.close();
        }
        done(err);
      },
    });
    this.body = body;
    this.exchange!.resolve({
      response: { statusCode: head.statusCode, reason: head.reason, headers: head.headers, body },
    });
    // Even with nothing after the head: a body of length 0 is complete already.
    return this.bodyBytes(rest, true);
  }

  private bodyBytes(data: Buffer, own: boolean): boolean {
    this.framing!.take(data, (piece) => this.bodyPiece(piece, own));
    if (this.framing!.done()) {
      if (this.framing!.extra() > 0) this.keepAlive = false;
      this.finish();
      return true;
    }
    if (!this.full) return true;
    this.full = false;
    this.paused = true;
    return false;
  }

  private bodyPiece(piece: Buffer, own: boolean): void {
    if (!this.intoCaller) {
      this.push(Buffer.from(piece));
      return;
    }
    if (!own) {
      // Read where nextBuffer said: the next bytes of the caller's buffer.
      const current = this.current;
      if (
        current === null ||
        piece.buffer !== current.buffer ||
        piece.byteOffset !== current.byteOffset + this.filled
      ) {
        throw new Error('S3 read: a body read landed outside the buffer it was given');
      }
      this.filled += piece.length;
      if (this.filled === current.length) this.handOut();
      return;
    }
    for (let at = 0; at < piece.length;) {
      const current = this.callerMemory();
      const n = piece.copy(current, this.filled, at);
      this.filled += n;
      at += n;
      if (this.filled === current.length) this.handOut();
    }
  }

  /** The caller's buffer being filled; a new one, sized for what is left of the body, when none is. */
  private callerMemory(): Buffer {
    if (this.current === null) {
      const wanted = this.framing!.wanted();
      this.current = this.exchange!.readInto(wanted > 0 ? Math.min(READ_BYTES, wanted) : READ_BYTES);
      this.filled = 0;
    }
    return this.current;
  }

  /** Hands out what the caller's buffer holds; nothing is read into it again. */
  private handOut(): void {
    const chunk = this.current?.subarray(0, this.filled);
    this.current = null;
    this.filled = 0;
    if (chunk !== undefined && chunk.length > 0) this.push(chunk);
  }

  private push(chunk: Buffer): void {
    if (!this.body!.push(chunk)) this.full = true;
  }

  /** The body is complete: the exchange is over and the connection free for another. */
  private finish(): void {
    this.handOut();
    const body = this.body!;
    this.endExchange();
    this.served++;
    body.push(null);
    if (!this.keepAlive || this.closed) {
      this.close();
      return;
    }
    this.socket.setTimeout(this.idleMs);
    this.socket.unref();
    // Reading while idle, so that a server closing the connection is seen at once.
    this.resume();
    this.release(this);
  }

  private ended(): void {
    // A body framed by the connection's end is complete when it ends; anything else is cut short.
    if (this.exchange !== null && this.phase === 'body' && this.framing!.kind === 'close') {
      this.keepAlive = false;
      this.finish();
      return;
    }
    this.fail(connectionReset(`${this.origin} closed the connection`));
  }

  /** Ends the exchange (if any) with `err` and closes the connection. */
  private fail(err: unknown): void {
    const exchange = this.exchange;
    const body = this.body;
    // A used connection that failed before any answer: the server had closed it while it was idle.
    const stale = exchange !== null && !this.heard && this.served > 0 && !exchange.signal?.aborted;
    this.endExchange();
    this.close();
    if (exchange === null) return;
    if (stale && exchange.again !== undefined) exchange.again();
    else if (body === null) exchange.reject(err);
    else body.destroy(err instanceof Error ? err : new Error(String(err)));
  }

  private endExchange(): void {
    this.exchange?.signal?.removeEventListener('abort', this.onAbort);
    this.exchange = null;
    this.body = null;
    this.framing = null;
    this.current = null;
    this.filled = 0;
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  return Object.assign(new Error('the request was aborted'), { name: 'AbortError' });
}
