/**
 * One HTTP exchange over Node's own `http` module: the transport of RpcClient and `excompact health`.
 *
 * Node's client is part of the runtime, so a short command pays nothing to load it (a bundled HTTP client
 * library cost an admin command about a tenth of its time). Connections are kept alive in one pool per
 * process; an idle pooled connection never keeps a process from exiting.
 */
import { Agent, request, type IncomingHttpHeaders } from 'node:http';

export interface HttpResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * A failed exchange. `connected` says whether a connection to the peer was ever open for it: when false,
 * nothing was sent, and the request can be repeated whatever it does.
 */
export class HttpExchangeError extends Error {
  readonly code: string | undefined;
  constructor(
    override readonly cause: unknown,
    readonly connected: boolean,
  ) {
    super((cause as Error)?.message ?? String(cause));
    this.name = (cause as Error)?.name ?? 'Error';
    this.code = (cause as { code?: string } | null)?.code;
  }
}

let pool: Agent | undefined;
/** The process-wide keep-alive connection pool. */
export function httpPool(): Agent {
  pool ??= new Agent({ keepAlive: true, keepAliveMsecs: 30_000, maxSockets: 64, scheduling: 'lifo' });
  return pool;
}

export function exchange(
  url: string,
  init: {
    method: string;
    headers?: Record<string, string>;
    body?: Buffer | undefined;
    signal: AbortSignal;
    /**
     * The request's path exactly as given, in place of the url's: a URL drops `.` and `..` segments
     * (`/v1/tables/.` would ask for the list of tables, under a signature made for another path).
     */
    path?: string;
  },
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    let connected = false;
    const fail = (err: unknown): void => reject(new HttpExchangeError(err, connected));
    const headers = { ...init.headers, 'content-length': String(init.body?.length ?? 0) };
    const req = request(
      url,
      {
        method: init.method,
        headers,
        agent: httpPool(),
        signal: init.signal,
        ...(init.path === undefined ? {} : { path: init.path }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', fail);
        res.on('end', () =>
          resolve({
            statusCode: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (err) => fail(init.signal.aborted ? (init.signal.reason ?? err) : err));
    req.end(init.body);
  });
}
