/**
 * GetObject bodies read straight into the caller's memory (StreamOptions.alloc), for the SDK.
 *
 * Through the SDK's Node handler, reading an object allocates about twice its size outside V8's heap:
 * each socket read is a fresh buffer and Node's HTTP client copies each piece of a body once more. Only
 * a full collection frees that memory, and V8 starts one for about every 64 MB of it: reading the ten
 * inputs of the merge benchmark's compaction (115 MB) made eight to twelve of them, more CPU than the
 * HTTP work itself.
 *
 * This handler takes the requests the store marks with `readInto` (a GET without a body) and sends the
 * request the SDK built and signed on a connection of its own, whose socket reads into memory from
 * `readInto` (net's `onread`); the response's body is a stream of views of that memory. Everything
 * else, and the answer to a marked request, is the SDK's as before: every other request goes to its
 * handler, and the response goes back through its parsers (a non-2xx answer becomes the same S3 error).
 * A dropped connection fails with ECONNRESET and a stalled one with TimeoutError, as there.
 *
 * Memory from `readInto` is the caller's once handed out: only a read into it is handed out, and a
 * connection that stops in the middle of a body is closed, never used again. The response's head and
 * whatever shares a read with it arrive in the connection's own small buffer and are copied.
 */
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpHandlerOptions, HttpRequest, HttpResponse } from '@smithy/types';
import {
  connectionReset,
  framingOf,
  parseHead,
  port,
  protocolError,
  requestHead,
  timeoutError,
  type BodyFraming,
  type ParsedHead,
} from './s3-http1.js';

/** Memory for the next read: a buffer of exactly `size` bytes, the caller's once filled. */
export type ReadInto = (size: number) => Buffer;

/** The SDK's per-request options, and where a marked GET's body is read into. */
export interface ReadIntoOptions extends HttpHandlerOptions {
  readInto?: ReadInto;
}

export interface ReadIntoHandlerOptions {
  /** The SDK's handler: every request that is not a marked GET. */
  inner: NodeHttpHandler;
  connectionTimeoutMs: number;
  /** Longest a connection may stay silent while a request waits on it. */
  socketTimeoutMs: number;
  /** TLS settings beyond the defaults (a test's own certificate authority). */
  tls?: ConnectionOptions;
}

/** Bytes asked of `readInto` for each read of a body. */
const READ_BYTES = 256 * 1024;
/** A connection's own buffer, for response heads. */
const OWN_BYTES = 16 * 1024;
/** A response head longer than this is not an S3 server's. */
const HEAD_LIMIT = 64 * 1024;
/** An idle connection is closed after this long (servers close theirs after 5 s or more). */
const IDLE_MS = 4_000;
const IDLE_PER_ORIGIN = 16;

export class ReadIntoHandler {
  private readonly idle = new Map<string, Connection[]>();
  private destroyed = false;

  constructor(private readonly options: ReadIntoHandlerOptions) {}

  /** The SDK's handler's settings (the SDK asks for them). */
  get metadata(): { handlerProtocol: string } {
    return this.options.inner.metadata;
  }

  handle(request: HttpRequest, options: ReadIntoOptions = {}): Promise<{ response: HttpResponse }> {
    const { readInto, abortSignal } = options;
    if (readInto === undefined || request.method !== 'GET' || request.body != null || this.destroyed) {
      // The SDK hands its handler its own request class; this one passes it on as it came.
      return this.options.inner.handle(request as Parameters<NodeHttpHandler['handle']>[0], options);
    }
    const signal = abortSignal as AbortSignal | undefined;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise((resolve, reject) => {
      // A request head that cannot be sent (requestHead throws) rejects before any connection is taken.
      const head = requestHead(request);
      const origin = `${request.protocol}//${request.hostname}:${port(request)}`;
      const connection = this.takeIdle(origin) ?? this.connect(request, origin);
      connection.start({ head, readInto, signal, resolve, reject });
    });
  }

  updateHttpClientConfig(key: never, value: never): void {
    this.options.inner.updateHttpClientConfig(key, value);
  }

  httpHandlerConfigs(): ReturnType<NodeHttpHandler['httpHandlerConfigs']> {
    return this.options.inner.httpHandlerConfigs();
  }

  destroy(): void {
    this.destroyed = true;
    for (const list of this.idle.values()) for (const c of list) c.close();
    this.idle.clear();
    this.options.inner.destroy();
  }

  private takeIdle(origin: string): Connection | undefined {
    const list = this.idle.get(origin);
    const connection = list?.pop();
    if (list?.length === 0) this.idle.delete(origin);
    return connection;
  }

  private connect(request: HttpRequest, origin: string): Connection {
    const connection = new Connection(origin, this.options.socketTimeoutMs, (c) => this.release(c));
    const onread = {
      buffer: () => connection.nextBuffer(),
      callback: (n: number, buf: Buffer) => connection.received(buf, n),
    };
    const host = request.hostname;
    const socket =
      request.protocol === 'https:'
        ? tlsConnect({
            host,
            port: port(request),
            ...(isIP(host) === 0 ? { servername: host } : {}),
            ALPNProtocols: ['http/1.1'],
            ...this.options.tls,
            // tls.connect passes onread to the socket it makes (Node's types leave it out).
            ...({ onread } as ConnectionOptions),
          })
        : netConnect({ host, port: port(request), onread });
    connection.attach(socket, this.options.connectionTimeoutMs, request.protocol === 'https:');
    return connection;
  }

  /** A connection whose exchange ended cleanly: kept for the next request to its origin, or closed. */
  private release(connection: Connection): void {
    const list = this.idle.get(connection.origin) ?? [];
    if (this.destroyed || list.length >= IDLE_PER_ORIGIN) {
      connection.close();
      return;
    }
    list.push(connection);
    this.idle.set(connection.origin, list);
    connection.onIdleEnd = () => {
      const at = list.indexOf(connection);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0 && this.idle.get(connection.origin) === list) this.idle.delete(connection.origin);
    };
  }
}

interface Exchange {
  head: string;
  readInto: ReadInto;
  signal: AbortSignal | undefined;
  resolve(result: { response: HttpResponse }): void;
  reject(err: unknown): void;
}

/** One connection, one exchange at a time: request sent, head parsed, body streamed, then idle again. */
class Connection {
  private socket!: Socket;
  private readonly own = Buffer.allocUnsafeSlow(OWN_BYTES);
  private connected = false;
  private exchange: Exchange | null = null;
  private phase: 'head' | 'body' = 'head';
  private headText = '';
  private framing: BodyFraming | null = null;
  private body: Readable | null = null;
  private keepAlive = false;
  private paused = false;
  private closed = false;
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
    this.phase = 'head';
    this.headText = '';
    this.socket.ref();
    if (this.connected) this.socket.setTimeout(this.socketTimeoutMs);
    exchange.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.socket.write(exchange.head);
    if (this.paused) this.resume();
  }

  /** The memory the next read goes into: the caller's for a body, this connection's own otherwise. */
  nextBuffer(): Buffer {
    if (this.exchange === null || this.phase !== 'body') return this.own;
    const remaining = this.framing!.wanted();
    return this.exchange.readInto(remaining > 0 ? Math.min(READ_BYTES, remaining) : READ_BYTES);
  }

  /** A read of `n` bytes into `buf`; false pauses the socket. */
  received(buf: Buffer, n: number): boolean {
    const data = buf.subarray(0, n);
    if (this.exchange === null) {
      // Nothing was asked: a server that talks out of turn is not one to send requests to.
      this.close();
      return false;
    }
    if (this.phase === 'head') return this.headBytes(data);
    return this.bodyBytes(data, buf === this.own);
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
      if (this.headText.length > HEAD_LIMIT)
        this.fail(protocolError(`a response head over ${HEAD_LIMIT} bytes`));
      return true;
    }
    let head: ParsedHead;
    try {
      head = parseHead(this.headText.slice(0, end));
    } catch (err) {
      this.fail(err);
      return false;
    }
    const rest = data.subarray(end + 4 - before);
    if (head.statusCode >= 100 && head.statusCode < 200) {
      // An interim answer (100 Continue): the real one follows.
      this.headText = '';
      return rest.length === 0 ? true : this.headBytes(Buffer.from(rest));
    }
    this.framing = framingOf(head);
    this.keepAlive = head.keepAlive && this.framing.kind !== 'close';
    this.phase = 'body';
    const exchange = this.exchange!;
    const body: Readable = new Readable({
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
    exchange.resolve({
      response: { statusCode: head.statusCode, reason: head.reason, headers: head.headers, body: this.body },
    });
    // Even with nothing after the head: a body of length 0 is complete already.
    return this.bodyBytes(rest, true);
  }

  private bodyBytes(data: Buffer, own: boolean): boolean {
    const body = this.body!;
    let more = true;
    let error: unknown = null;
    // Handed out as they are only when the read is the body's alone: bytes in this connection's own
    // memory are copied (it is read into again), and so are a chunked body's, whose one read may hold
    // several pieces (a caller done with the first would give back memory the next still points into).
    const copy = own || this.framing!.kind === 'chunked';
    try {
      this.framing!.take(data, (piece) => {
        const out = copy ? Buffer.from(piece) : piece;
        if (!body.push(out)) more = false;
      });
    } catch (err) {
      error = err;
    }
    if (error !== null) {
      this.fail(error);
      return false;
    }
    if (this.framing!.done()) {
      if (this.framing!.extra() > 0) this.keepAlive = false;
      this.finish();
      return true;
    }
    if (!more) this.paused = true;
    return more;
  }

  /** The body is complete: the exchange is over and the connection free for another. */
  private finish(): void {
    const body = this.body!;
    this.endExchange();
    body.push(null);
    if (this.keepAlive && !this.closed) {
      this.socket.setTimeout(IDLE_MS);
      this.socket.unref();
      this.release(this);
    } else {
      this.close();
    }
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
    this.endExchange();
    this.close();
    if (exchange === null) return;
    if (body === null) exchange.reject(err);
    else body.destroy(err instanceof Error ? err : new Error(String(err)));
  }

  private endExchange(): void {
    this.exchange?.signal?.removeEventListener('abort', this.onAbort);
    this.exchange = null;
    this.body = null;
    this.framing = null;
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  return Object.assign(new Error('the request was aborted'), { name: 'AbortError' });
}
