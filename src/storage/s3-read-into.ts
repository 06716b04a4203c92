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
 * request the SDK built and signed on a keep-alive connection of its own (s3-read-connection.ts), whose
 * socket reads a successful answer's body into memory from `readInto`; the body is a stream of that
 * memory. Everything else is the SDK's as before: every other request goes to its handler, and the
 * response goes back through its parsers (a non-2xx answer becomes the same S3 error). A dropped
 * connection fails with ECONNRESET and a stalled one with TimeoutError, as there; a request that meets
 * a connection the server closed while it was idle (or answers 408 on it) is sent again on a new one.
 */
import { connect as netConnect, isIP } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpHandlerOptions, HttpRequest, HttpResponse } from '@smithy/types';
import { port, requestHead } from './s3-http1.js';
import { Connection, type ReadInto } from './s3-read-connection.js';

export type { ReadInto } from './s3-read-connection.js';

/** The SDK's per-request options, and where a marked GET's body is read into. */
export interface ReadIntoOptions extends HttpHandlerOptions {
  readInto?: ReadInto | undefined;
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

/** Idle connections kept per server. */
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
      const send = (reuse: boolean): void => {
        const idle = reuse ? this.takeIdle(origin) : undefined;
        const connection = idle ?? this.connect(request, origin);
        connection.start({
          head,
          readInto,
          signal,
          resolve,
          reject,
          again: idle === undefined ? undefined : () => send(false),
        });
      };
      send(true);
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
    // Copies: closing a connection takes it out of its list.
    for (const list of [...this.idle.values()]) for (const c of [...list]) c.close();
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
    // The SDK keeps an IPv6 address in brackets, as in a URL; sockets take it bare.
    const host = request.hostname.replace(/^\[(.*)\]$/, '$1');
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

  /** A connection whose exchange ended cleanly: kept for the next request to its server, or closed. */
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

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return Object.assign(new Error('the request was aborted'), { name: 'AbortError' });
}
