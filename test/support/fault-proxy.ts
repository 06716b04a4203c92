/**
 * An HTTP proxy in front of the S3 server that injects faults into chosen requests: an error status with
 * an S3 error body (503 SlowDown, 500 InternalError, 403 AccessDenied...), a connection reset, a response
 * body cut after some bytes, a request body cut part way (a PUT that fails half way), or a slow answer.
 * Requests are forwarded untouched otherwise (the Host header included, so signatures stay valid).
 *
 * Faults are chosen deterministically (`inject`: the next N matching requests) or at random (`setRandom`:
 * each matching request with a probability, drawn from the caller's random source, for the chaos run).
 *
 *   const proxy = await FaultProxy.start(s3Port);
 *   proxy.inject({ kind: 'status', status: 503, code: 'SlowDown' }, { times: 2, method: 'PUT' });
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export type Fault =
  | { kind: 'status'; status: number; code: string }
  | { kind: 'reset' }
  | { kind: 'cut-body'; afterBytes: number }
  /** Forward this fraction of the request body, then drop both connections. */
  | { kind: 'cut-request'; fraction: number }
  /** Answer normally, after this long. */
  | { kind: 'delay'; ms: number }
  /**
   * Forward the request and let the server act on it, then lose its answer: `then` runs (a test kills the
   * server there, as if it died right after acting), and the client's connection is cut.
   */
  | { kind: 'lose-answer'; then?: () => void };

/** Random faults: each request matching `method` gets one of `faults` with `probability`. */
export interface RandomFaults {
  probability: number;
  faults: readonly Fault[];
  method?: string;
  /** A random number in [0, 1): the chaos run passes its seeded source. */
  random: () => number;
}

export interface RecordedRequest {
  method: string;
  url: string;
  range: string | undefined;
  fault: Fault['kind'] | null;
}

interface Rule {
  fault: Fault;
  remaining: number;
  method?: string;
  urlIncludes?: string;
}

export class FaultProxy {
  /** Every request seen (unless `record` is off: a long run would keep them all). */
  readonly requests: RecordedRequest[] = [];
  record = true;
  /** Faults injected, by kind. */
  readonly injected: Record<string, number> = {};
  private readonly rules: Rule[] = [];
  private random: RandomFaults | null = null;
  private readonly sockets = new Set<Socket>();
  /** Client connections accepted so far. */
  connectionsAccepted = 0;

  private constructor(
    private readonly server: Server,
    private readonly targetPort: number,
    readonly port: number,
  ) {}

  static async start(targetPort: number): Promise<FaultProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new FaultProxy(server, targetPort, (server.address() as { port: number }).port);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => proxy.handle(req, res));
    server.on('connection', (s: Socket) => {
      proxy.connectionsAccepted++;
      proxy.sockets.add(s);
      s.once('close', () => proxy.sockets.delete(s));
    });
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The next `times` requests that match (method, a substring of the URL) get `fault`. */
  inject(fault: Fault, options: { times?: number; method?: string; urlIncludes?: string } = {}): void {
    this.rules.push({
      fault,
      remaining: options.times ?? 1,
      method: options.method,
      urlIncludes: options.urlIncludes,
    });
  }

  /** Random faults from now on (null: none). */
  setRandom(random: RandomFaults | null): void {
    this.random = random;
  }

  clear(): void {
    this.rules.length = 0;
    this.requests.length = 0;
    this.random = null;
    for (const kind of Object.keys(this.injected)) delete this.injected[kind];
  }

  count(method: string, urlIncludes = ''): number {
    return this.requests.filter((r) => r.method === method && r.url.includes(urlIncludes)).length;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private take(req: IncomingMessage): Fault | null {
    for (const rule of this.rules) {
      if (rule.remaining <= 0) continue;
      if (rule.method !== undefined && rule.method !== req.method) continue;
      if (rule.urlIncludes !== undefined && !req.url?.includes(rule.urlIncludes)) continue;
      rule.remaining--;
      return rule.fault;
    }
    const r = this.random;
    if (r && (r.method === undefined || r.method === req.method) && r.random() < r.probability) {
      return r.faults[Math.floor(r.random() * r.faults.length)] ?? null;
    }
    return null;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const fault = this.take(req);
    const range = req.headers.range;
    if (this.record)
      this.requests.push({ method: req.method ?? '', url: req.url ?? '', range, fault: fault?.kind ?? null });
    if (fault) this.injected[fault.kind] = (this.injected[fault.kind] ?? 0) + 1;
    if (fault?.kind === 'delay') {
      req.pause();
      setTimeout(() => this.forward(req, res, null), fault.ms);
      return;
    }
    if (fault?.kind === 'status') {
      // Read the request body first, as a server would, so the client sees an answer and not a broken pipe.
      req.resume();
      req.once('end', () => {
        const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${fault.code}</Code><Message>injected by the test proxy</Message><RequestId>0</RequestId></Error>`;
        res.writeHead(fault.status, {
          'content-type': 'application/xml',
          'content-length': Buffer.byteLength(body),
        });
        res.end(req.method === 'HEAD' ? undefined : body);
      });
      return;
    }
    if (fault?.kind === 'reset') {
      req.resume();
      req.once('end', () => req.socket.destroy());
      return;
    }
    this.forward(req, res, fault);
  }

  private forward(req: IncomingMessage, res: ServerResponse, fault: Fault | null): void {
    const upstream = request(
      { host: '127.0.0.1', port: this.targetPort, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        if (fault?.kind === 'lose-answer') {
          up.resume();
          fault.then?.();
          req.socket.destroy();
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (fault?.kind !== 'cut-body') {
          up.pipe(res);
          return;
        }
        let sent = 0;
        up.on('data', (chunk: Buffer) => {
          if (sent >= fault.afterBytes) return;
          const part = chunk.subarray(0, fault.afterBytes - sent);
          sent += part.length;
          res.write(part);
          if (sent >= fault.afterBytes) {
            // Let the bytes reach the client, then drop the connection mid-body.
            setTimeout(() => {
              up.destroy();
              req.socket.destroy();
            }, 20);
          }
        });
      },
    );
    upstream.on('error', () => req.socket.destroy());
    if (fault?.kind !== 'cut-request') {
      req.pipe(upstream);
      return;
    }
    // A client that dies (or a network that breaks) half way through its upload.
    const length = Number(req.headers['content-length'] ?? 0);
    const limit = Math.floor(length * fault.fraction);
    let sent = 0;
    req.on('data', (chunk: Buffer) => {
      if (sent > limit) return;
      const part = chunk.subarray(0, Math.max(0, limit - sent));
      sent += chunk.length;
      if (part.length > 0) upstream.write(part);
      if (sent > limit) {
        setTimeout(() => {
          upstream.destroy();
          req.socket.destroy();
        }, 20);
      }
    });
  }
}
