/**
 * The monitor's web server: the page (plain files from web/monitor, no build step), the latest snapshot
 * of the cluster, 30 minutes of samples for the charts, and the actions (cancel a running compaction,
 * release a parked job, cancel a parked user job), each passed on as a signed call to the manager. The instance secret stays in this
 * process: the browser only ever talks to this server.
 *
 * Who may talk to it:
 * - Bound to loopback (the default), anyone on this host. A page from elsewhere cannot use it through the
 *   visitor's browser: requests whose Host is not a loopback name are refused (DNS rebinding), and every
 *   change must carry the `x-excompact-monitor` header, which a cross-site form cannot send and a
 *   cross-site fetch cannot send without a preflight this server never grants.
 * - Bound to anything else (`--host` with `--allow-remote`), only holders of the login token: `/login?token=`
 *   sets it as an HttpOnly, SameSite=Strict cookie; the API also takes `Authorization: Bearer <token>`.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Server } from 'node:http';
import { isIPv4, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ExcError, toExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { fromExpressError } from '../rpc/server.js';
import type { ManagerCall, Snapshot, SnapshotReader } from './snapshot.js';

/** The page's files: web/monitor at the repository root (two levels up from src/monitor and dist/monitor). */
export const PAGE_DIR = fileURLToPath(new URL('../../web/monitor/', import.meta.url));

export interface MonitorOptions {
  host: string;
  port: number;
  /** Required when `host` is not loopback. */
  token?: string;
  reader: SnapshotReader;
  call: ManagerCall;
  log: Logger;
  /** How often the cluster is read (default 1 s). */
  pollMs?: number;
  /** How long samples are kept for the charts (default 30 min). */
  historyMs?: number;
}

/** One point of the charts. */
export interface Sample {
  at: number;
  queued: Record<string, number>;
  running: Record<string, number>;
  readBytesPerSec: number;
}

const LOOPBACK = new Set(['::1', 'localhost']);
const ECID = /^[0-9A-Z]{26}$/;
/** A parked job's id (its failure key) or the ECID of its last attempt. */
const PARKED_ID = /^(?:[0-9a-f]{24}|[0-9A-Z]{26})$/;

/** Listen failures that the user fixes with another --port or --host. */
const USAGE_LISTEN_ERRORS = new Map([
  ['EADDRINUSE', 'the port is in use (give another --port, or --port 0 for any free one)'],
  ['EACCES', 'not allowed to use this port (give another --port, or --port 0 for any free one)'],
  ['EADDRNOTAVAIL', 'no such address on this host (give another --host)'],
]);

/**
 * A loopback name: `localhost`, `::1` (bracketed or not) or an IPv4 literal in 127/8. Only a real address:
 * `127.attacker.example` is a name anyone can point at this host (DNS rebinding).
 */
export function isLoopback(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return LOOPBACK.has(bare) || (isIPv4(bare) && bare.startsWith('127.'));
}

function hostName(header: string | undefined): string {
  if (!header) return '';
  if (header.startsWith('[')) return header.slice(1, header.indexOf(']'));
  return header.split(':')[0] ?? '';
}

export class MonitorServer {
  private server: Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private latest: Snapshot | undefined;
  private lastError: string | null = null;
  private readonly samples: Sample[] = [];
  private readonly remote: boolean;

  constructor(private readonly options: MonitorOptions) {
    this.remote = !isLoopback(options.host);
    if (this.remote && (!options.token || options.token.length < 16)) {
      throw new ExcError(
        'BAD_REQUEST',
        `the monitor binds to ${options.host}, beyond this host: it needs --allow-remote and a login token of at least 16 characters`,
      );
    }
  }

  /** Starts polling the cluster and listening; resolves with the page's URL. */
  async start(): Promise<string> {
    await this.poll();
    const app = this.app();
    const server = app.listen(this.options.port, this.options.host);
    const host = this.options.host.includes(':') ? `[${this.options.host}]` : this.options.host;
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', (err: NodeJS.ErrnoException) => {
        const where = `${host}:${this.options.port}`;
        // A port in use or not ours to take, or an address not of this host: the user's to change (the CLI
        // exits 1), not the cluster being unreachable.
        const usage = USAGE_LISTEN_ERRORS.get(err.code ?? '');
        reject(
          usage
            ? new ExcError('BAD_REQUEST', `monitor cannot listen on ${where}: ${usage}`, { cause: err })
            : new ExcError('UNAVAILABLE', `monitor cannot listen on ${where}: ${err.message}`, {
                cause: err,
              }),
        );
      });
    });
    this.server = server;
    const { port } = server.address() as AddressInfo;
    const pollMs = this.options.pollMs ?? 1_000;
    const tick = (): void => {
      this.timer = setTimeout(() => void this.poll().finally(tick), pollMs);
    };
    tick();
    return `http://${host}:${port}/`;
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async poll(): Promise<void> {
    try {
      const snapshot = await this.options.reader.read();
      this.latest = snapshot;
      this.lastError = null;
      const keepFrom = snapshot.at - (this.options.historyMs ?? 30 * 60_000);
      while (this.samples.length > 0 && this.samples[0]!.at < keepFrom) this.samples.shift();
      this.samples.push({
        at: snapshot.at,
        queued: Object.fromEntries(snapshot.queues.map((q) => [q.name, q.queued])),
        running: Object.fromEntries(snapshot.queues.map((q) => [q.name, q.running])),
        readBytesPerSec: snapshot.readBytesPerSec,
      });
    } catch (err) {
      const e = toExcError(err);
      if (this.lastError !== e.message)
        this.options.log.warn({ code: e.code, err: e.message }, 'monitor poll failed');
      this.lastError = `${e.code}: ${e.message}`;
    }
  }

  private app(): express.Express {
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);
    app.use((req, res, next) => {
      res.setHeader('x-content-type-options', 'nosniff');
      res.setHeader('referrer-policy', 'no-referrer');
      res.setHeader('x-frame-options', 'DENY');
      res.setHeader(
        'content-security-policy',
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
      );
      next();
    });
    app.use((req, _res, next) => this.admit(req, next));
    app.get('/login', (req, res) => {
      // Reached only with the right token (admit checked it): remember it and go to the page.
      const token = typeof req.query.token === 'string' ? req.query.token : '';
      res.cookie('excompact_monitor', token, { httpOnly: true, sameSite: 'strict', path: '/' });
      res.redirect(303, '/');
    });
    app.get('/api/state', (req, res) => {
      const since = Number(req.query.since ?? 0);
      res.json({
        snapshot: this.latest ?? null,
        error: this.lastError,
        samples: this.samples.filter((s) => s.at > since),
      });
    });
    app.post('/api/compactions/:ecid/cancel', (req, res, next) => {
      const ecid = req.params.ecid ?? '';
      if (!ECID.test(ecid)) return next(new ExcError('BAD_REQUEST', 'expected a compaction id'));
      this.options.log.info({ ecid }, 'monitor: cancelling a compaction');
      this.options
        .call('POST', `/v1/compactions/${ecid}/cancel`, {})
        .then((answer) => res.json(answer), next);
    });
    app.post('/api/parked/:id/release', (req, res, next) => {
      const id = req.params.id ?? '';
      if (!PARKED_ID.test(id)) return next(new ExcError('BAD_REQUEST', 'expected a parked job id'));
      this.options.log.info({ id }, 'monitor: releasing a parked job');
      this.options.call('POST', '/v1/compactions/release', { id }).then((answer) => res.json(answer), next);
    });
    app.post('/api/parked/:id/cancel', (req, res, next) => {
      const id = req.params.id ?? '';
      if (!PARKED_ID.test(id)) return next(new ExcError('BAD_REQUEST', 'expected a parked job id'));
      this.options.log.info({ id }, 'monitor: cancelling a parked job');
      this.options.call('POST', `/v1/compactions/${id}/cancel`, {}).then((answer) => res.json(answer), next);
    });
    app.use(express.static(PAGE_DIR, { index: 'index.html', etag: false, maxAge: 0 }));
    app.use((req: Request) => {
      throw new ExcError('NOT_FOUND', `no page ${req.path}`);
    });
    app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
      // fromExpressError: a path with malformed percent-encoding (`%ZZ`) is the client's 400, not a 500.
      const e = fromExpressError(err);
      if (!res.headersSent) res.status(e.status).json({ error: { code: e.code, message: e.message } });
    });
    return app;
  }

  /** Who may use the monitor (see the top of this file). */
  private admit(req: Request, next: NextFunction): void {
    if (this.remote) {
      const given =
        (req.path === '/login' && typeof req.query.token === 'string' ? req.query.token : undefined) ??
        cookie(req.headers.cookie, 'excompact_monitor') ??
        /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (!given || !sameToken(given, this.options.token!)) {
        return next(
          new ExcError('UNAUTHENTICATED', 'open the login link the monitor printed (…/login?token=…)'),
        );
      }
    } else if (!isLoopback(hostName(req.headers.host))) {
      return next(new ExcError('FORBIDDEN', 'the monitor answers only to localhost names'));
    }
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.headers['x-excompact-monitor'] !== '1') {
      return next(new ExcError('FORBIDDEN', 'changes need the x-excompact-monitor header'));
    }
    next();
  }
}

function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k !== name) continue;
    try {
      return decodeURIComponent(v.join('='));
    } catch {
      return undefined; // malformed percent-encoding: no cookie, so not signed in (never a 500)
    }
  }
  return undefined;
}

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
