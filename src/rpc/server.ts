/**
 * The HTTP/JSON server every process uses.
 *
 * - Everything under `/v1` is authenticated ({@link RequestVerifier}); `/healthz` and `/metrics` are not
 *   (they reveal no data and health checks and scrapers hold no secret).
 * - The signature is checked from the headers alone, before a byte of the body is read: an unsigned or
 *   badly signed request gets 401 and its connection is closed, so a flood of them costs no memory.
 * - Then the body is read raw, limited to `maxBodyBytes` (413, also up front from Content-Length), hashed
 *   as it streams in and compared with the hash the signature covers (400 CONTENT_HASH_MISMATCH), parsed
 *   as JSON (400) and validated with the route's zod schema (400 naming the field).
 * - One error model: `{ "error": { "code": "...", "message": "..." } }`, the status following the code.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { z } from 'zod';
import { ExcError, toExcError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { RequestVerifier, rpcKey } from './auth.js';
import { parseInput } from '../validate.js';
import { answerClientError } from './client-error.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RpcServerOptions {
  secret: string;
  logger?: Logger;
  /** Largest accepted body (default 16 MiB). */
  maxBodyBytes?: number;
  /** Freshness window of signatures (default 60 s). */
  maxSkewMs?: number;
  /** What `/healthz` reports; 200 when `ok`, 503 otherwise. */
  health?: () => { ok: boolean; [key: string]: unknown };
  /** Prometheus exposition for `/metrics`. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /** Told how long each authenticated route took to answer (`METHOD /v1/path`, its pattern), errors too. */
  timing?: (route: string, seconds: number) => void;
  /**
   * The port other processes reach this one on, when not the one it listens on (EXC_ADVERTISE_PORT:
   * behind a proxy or a port mapping): requests signed for it are this server's too.
   */
  advertisedPort?: number;
}

export interface RouteInput<B, Q> {
  body: B;
  query: Q;
  params: Record<string, string>;
  /** Aborted when the client disconnects before the answer. */
  signal: AbortSignal;
}

export interface RouteSpec<BS extends z.ZodType | undefined, QS extends z.ZodType | undefined> {
  body?: BS;
  query?: QS;
}

/** The validated input, or the raw parsed JSON when the route has no schema (it validates itself). */
type Out<S> = S extends z.ZodType ? z.output<S> : unknown;

export class RpcServer {
  readonly app: express.Express;
  private readonly router: express.Router;
  private readonly log: Logger;
  private server: Server | undefined;
  private closing: Promise<void> | undefined;
  private readonly timing: RpcServerOptions['timing'];

  constructor(options: RpcServerOptions) {
    this.timing = options.timing;
    this.log = (options.logger ?? silentLogger()).child({ component: 'rpc' });
    const verifier = new RequestVerifier(rpcKey(options.secret), {
      maxSkewMs: options.maxSkewMs ?? 60_000,
      // A request signed for another process of the instance is refused (auth.ts).
      ports: () => {
        const bound = (this.server?.address() as AddressInfo | null)?.port;
        if (bound === undefined) return undefined;
        return options.advertisedPort ? [bound, options.advertisedPort] : [bound];
      },
    });
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);

    app.get('/healthz', (_req, res) => {
      const health = options.health?.() ?? { ok: true };
      res.status(health.ok ? 200 : 503).json(health);
    });
    if (options.metrics) {
      const metrics = options.metrics;
      app.get('/metrics', async (_req, res) => {
        const { contentType, body } = await metrics();
        res.type(contentType).send(body);
      });
    }

    this.router = express.Router();
    const maxBodyBytes = options.maxBodyBytes ?? 16 << 20;
    app.use(
      '/v1',
      async (req: Request, _res: Response, next: NextFunction) => {
        const declared = verifier.verify({ method: req.method, path: req.originalUrl, headers: req.headers });
        const body = await readBody(req, declared, maxBodyBytes);
        req.body = parseJsonBody(body, req.headers['content-type']);
        next();
      },
      this.router,
    );
    // An authenticated no-op: the baseline of every RPC benchmark.
    this.router.get('/ping', (_req: Request, res: Response) => void res.json({}));
    app.use((req: Request) => {
      throw new ExcError('NOT_FOUND', `no route ${req.method} ${req.path}`);
    });
    app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
      const e = fromExpressError(err);
      if (e.code === 'INTERNAL')
        this.log.error({ err, method: req.method, path: req.path }, 'request failed');
      else
        this.log.debug(
          { code: e.code, method: req.method, path: req.path, msg: e.message },
          'request rejected',
        );
      // A request refused before its body was read (unsigned, too large) must not have it read afterwards:
      // Node would drain it to keep the connection alive. Closing the connection costs the client a
      // reconnect, and an attacker nothing but the bytes it sends into a closed socket.
      if (!req.complete && !res.headersSent) res.setHeader('connection', 'close');
      // What a bug threw (not an ExcError) is logged above, not answered: its message can hold anything,
      // an absolute path on this host among others.
      const message =
        e.code === 'INTERNAL' && !(err instanceof ExcError)
          ? `internal error (${err instanceof Error ? err.name : typeof err}); the server logged it`
          : e.message;
      if (!res.headersSent) res.status(e.status).json({ error: { code: e.code, message } });
    });
    this.app = app;
  }

  /**
   * Adds a route under `/v1`. The handler's resolved value is sent as JSON with status 200; a thrown
   * ExcError becomes its error response.
   */
  route<
    BS extends z.ZodType | undefined = undefined,
    QS extends z.ZodType | undefined = undefined,
    R = unknown,
  >(
    method: HttpMethod,
    path: string,
    spec: RouteSpec<BS, QS>,
    handler: (input: RouteInput<Out<BS>, Out<QS>>) => Promise<R> | R,
  ): void {
    const register = this.router[method.toLowerCase() as 'get' | 'post' | 'put' | 'delete'].bind(this.router);
    const label = `${method} /v1${path}`;
    const timing = this.timing;
    register(path, async (req: Request, res: Response) => {
      if (timing) {
        const started = performance.now();
        res.once('close', () => timing(label, (performance.now() - started) / 1000));
      }
      const body = (spec.body ? parseInput(spec.body, req.body ?? {}, 'body') : req.body) as Out<BS>;
      const query = (spec.query ? parseInput(spec.query, req.query, 'query') : req.query) as Out<QS>;
      const aborter = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) aborter.abort(new ExcError('UNAVAILABLE', 'client went away'));
      });
      const result = await handler({
        body,
        query,
        params: req.params as Record<string, string>,
        signal: aborter.signal,
      });
      res.status(200).json(result ?? {});
    });
  }

  /** Starts listening; resolves with the bound address. */
  async listen(host: string, port: number): Promise<{ host: string; port: number }> {
    const server = this.app.listen(port, host);
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', (err) =>
        reject(
          new ExcError('UNAVAILABLE', `cannot listen on ${host}:${port}: ${err.message}`, { cause: err }),
        ),
      );
    });
    server.on('clientError', answerClientError);
    server.keepAliveTimeout = 65_000;
    server.requestTimeout = 120_000;
    this.server = server;
    const address = server.address() as AddressInfo;
    return { host: address.address, port: address.port };
  }

  /** Stops accepting connections, lets requests in flight finish for up to `graceMs`, then drops the rest. */
  close(graceMs = 2_000): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    this.closing ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      server.closeIdleConnections();
    });
    return this.closing;
  }
}

/**
 * Reads a signed request's body: at most `limit` bytes (413 at once when Content-Length says more),
 * hashed as it arrives; refused when its hash is not the one the signature covers.
 */
function readBody(req: IncomingMessage, declaredHash: string, limit: number): Promise<Buffer> {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') {
    throw new ExcError('UNSUPPORTED_MEDIA_TYPE', `content-encoding ${encoding} is not supported`);
  }
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > limit) throw tooLarge(Number(length), limit);
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const hash = createHash('sha256');
    let size = 0;
    let done = false;
    const fail = (err: ExcError): void => {
      if (done) return;
      done = true;
      req.pause();
      req.removeListener('data', onData);
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) return fail(tooLarge(size, limit));
      hash.update(chunk);
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('aborted', () => fail(new ExcError('BAD_REQUEST', 'request aborted by the client')));
    req.once('error', (err) => fail(new ExcError('BAD_REQUEST', `reading the request: ${err.message}`)));
    req.once('end', () => {
      if (done) return;
      if (hash.digest('hex') !== declaredHash) {
        return fail(
          new ExcError(
            'CONTENT_HASH_MISMATCH',
            `the body does not match its signed hash (x-exc-content-sha256): ${size} bytes received`,
          ),
        );
      }
      done = true;
      resolve(Buffer.concat(chunks, size));
    });
  });
}

function tooLarge(size: number, limit: number): ExcError {
  return new ExcError(
    'PAYLOAD_TOO_LARGE',
    `request body of ${size} bytes exceeds the limit of ${limit} bytes`,
  );
}

function parseJsonBody(body: Buffer, contentType: string | undefined): unknown {
  if (body.length === 0) return undefined;
  if (contentType && !/^application\/json\b/i.test(contentType)) {
    throw new ExcError('UNSUPPORTED_MEDIA_TYPE', `content-type must be application/json, not ${contentType}`);
  }
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ExcError('BAD_REQUEST', `body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Errors thrown by express itself carry `type` and `status`; everything else goes through toExcError. Also
 * the monitor's (monitor/server.ts), which routes with express the same way.
 */
export function fromExpressError(err: unknown): ExcError {
  const e = err as { type?: unknown; status?: unknown } | null;
  // The router's own refusals (a path parameter with malformed percent-encoding: a URIError with status
  // 400) are the client's mistake, not a bug.
  if (!(err instanceof ExcError) && typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    return new ExcError('BAD_REQUEST', `bad request: ${(err as Error).message}`);
  }
  return toExcError(err);
}
