/**
 * The fuzzer: seeded fast-check generators (routes.ts, cli-cases.ts) against a real cluster (cluster.ts),
 * one request at a time, each judged:
 *
 *   - a 4xx must carry `{ error: { code, message } }` with a code and a message naming what was wrong, and
 *     must have changed nothing: the metadata store and the queues in ZooKeeper are compared before and
 *     after (the cluster is let settle first, so that what an earlier request set going is not counted);
 *   - a 2xx must have had the route's documented effect (where the route says what that is);
 *   - a 5xx, a process that exits, an `admin` command that crashes or exits with anything but 0, 1 or 5
 *     (check found a problem) are findings, never expected.
 *
 * The same seed gives the same requests against the same starting state.
 */
import fc from 'fast-check';
import { rpcKey, signRequest } from '../../src/rpc/auth.js';
import { exchange } from '../../src/rpc/http.js';
import { cliCaseArb, type CliCase } from './cli-cases.js';
import type { Known } from './inputs.js';
import { caseArb, type Case, type EffectContext, type Target } from './routes.js';

/** The cluster as the fuzzer sees it. */
export interface FuzzTarget {
  secret: string;
  urls: Record<Target, string>;
  /** Names, rows and nodes that exist now; recreates the baseline table and queue when they are gone. */
  known(): Promise<Known>;
  /** Everything a request could change: metadata rows and the queues in ZooKeeper. */
  snapshot(): Promise<Map<string, string>>;
  /**
   * Whether nothing is under way in a snapshot (every tablet hosted, none moving): work the manager does
   * on its own schedule shows no change for a while and then does.
   */
  quiet(snapshot: Map<string, string>): boolean;
  /** Names of the cluster's processes that are no longer running. */
  dead(): string[];
  /** Runs `excompact <args>`, with `input` on its standard input. */
  cli(args: string[], input?: string): Promise<{ code: number | null; stdout: string; stderr: string }>;
}

export interface FuzzOptions {
  seed: number;
  /** Stop after this many requests and commands... */
  requests?: number;
  /** ...or after this many seconds, whichever comes first. */
  seconds?: number;
  /** One in this many cases is an `admin` command (default 5). */
  cliEvery?: number;
  /** Per-request timeout (default 15 s; a route that holds requests open gets 1.5 s). */
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface Finding {
  kind:
    '5xx' | 'crash' | 'state changed by a rejected request' | 'bad error' | 'effect missing' | 'no answer';
  what: string;
  detail: string;
}

export interface Figures {
  seed: number;
  requests: number;
  rpc: number;
  commands: number;
  rejected: number;
  accepted: number;
  serverErrors: number;
  crashes: number;
  changedByRejected: number;
  badErrors: number;
  missingEffects: number;
  noAnswer: number;
  routes: number;
  seconds: number;
}

type Verdict = { rejected: boolean; finding?: Omit<Finding, 'what'> };

export async function runFuzz(
  target: FuzzTarget,
  options: FuzzOptions,
): Promise<{ figures: Figures; findings: Finding[] }> {
  const started = Date.now();
  const deadline = options.seconds === undefined ? Infinity : started + options.seconds * 1_000;
  const max = options.requests ?? Infinity;
  const cliEvery = options.cliEvery ?? 5;
  const key = rpcKey(target.secret);
  const f: Figures = {
    seed: options.seed,
    requests: 0,
    rpc: 0,
    commands: 0,
    rejected: 0,
    accepted: 0,
    serverErrors: 0,
    crashes: 0,
    changedByRejected: 0,
    badErrors: 0,
    missingEffects: 0,
    noAnswer: 0,
    routes: 0,
    seconds: 0,
  };
  const findings: Finding[] = [];
  const routesSeen = new Set<string>();

  const send = async (c: Pick<Case, 'target' | 'method' | 'path' | 'body' | 'raw' | 'holds'>) => {
    const bytes =
      c.raw !== undefined
        ? Buffer.from(c.raw, 'utf8')
        : c.body === undefined
          ? undefined
          : Buffer.from(JSON.stringify(c.body), 'utf8');
    const host = new URL(target.urls[c.target]).host;
    const headers: Record<string, string> = signRequest(key, {
      method: c.method,
      host,
      path: c.path,
      body: bytes,
    });
    if (bytes) headers['content-type'] = 'application/json';
    const timeoutMs = c.holds ? 1_500 : (options.timeoutMs ?? 15_000);
    try {
      // Node's http, as the project's client sends: what it is given (a GET with a body among others),
      // at exactly the path signed (a URL would drop `.` and `..` segments).
      const res = await exchange(target.urls[c.target], {
        method: c.method,
        headers,
        body: bytes,
        signal: AbortSignal.timeout(timeoutMs),
        path: c.path,
      });
      const text = res.text;
      let json: unknown;
      try {
        json = text === '' ? undefined : JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: res.statusCode, json, text };
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string };
      return {
        status: 0,
        json: undefined,
        text: `${e.name ?? ''} ${e.code ?? ''} ${e.message ?? String(err)}`,
      };
    }
  };
  const ctx: EffectContext = {
    manager: async (method, path, body) => {
      const r = await send({ target: 'manager', method: method as Case['method'], path, body });
      return { status: r.status, json: r.json };
    },
  };

  const judgeRpc = async (c: Case): Promise<Verdict> => {
    const r = await send(c);
    if (r.status === 0) {
      if (c.holds) return { rejected: false }; // held open, as documented (long poll, link)
      return { rejected: false, finding: { kind: 'no answer', detail: r.text } };
    }
    if (r.status >= 500)
      return { rejected: false, finding: { kind: '5xx', detail: `${r.status} ${r.text.slice(0, 500)}` } };
    // Every request is signed with the instance's secret: one refused as unauthenticated was not
    // understood as sent.
    if (r.status === 401)
      return { rejected: true, finding: { kind: 'bad error', detail: `401 ${r.text.slice(0, 300)}` } };
    if (r.status >= 400) {
      const error = (r.json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
      if (typeof error?.code !== 'string' || typeof error.message !== 'string' || error.message.length < 5) {
        return {
          rejected: true,
          finding: { kind: 'bad error', detail: `${r.status} ${r.text.slice(0, 300)}` },
        };
      }
      return { rejected: true };
    }
    if (c.effect) {
      const problem = await c
        .effect(r.json, ctx)
        .catch((err: unknown) => `checking the effect: ${String(err)}`);
      if (problem) return { rejected: false, finding: { kind: 'effect missing', detail: problem } };
    }
    return { rejected: false };
  };

  const judgeCli = async (c: CliCase): Promise<Verdict> => {
    const r = await target.cli(c.args, c.input);
    const stackTrace = /\n\s+at .+\(.*:\d+:\d+\)/.test(r.stderr);
    if (r.code === 0 || (r.code === 5 && c.command === 'admin check')) {
      return stackTrace
        ? { rejected: false, finding: { kind: 'bad error', detail: r.stderr } }
        : { rejected: false };
    }
    if (r.code === 1) {
      const first = r.stderr.trim().split('\n')[0] ?? '';
      // The CLI holds the instance's secret: UNAUTHENTICATED means it sent another request than it signed.
      if (stackTrace || first.length < 10 || /UNAUTHENTICATED/.test(r.stderr))
        return { rejected: true, finding: { kind: 'bad error', detail: r.stderr.slice(0, 500) } };
      return { rejected: true };
    }
    return {
      rejected: false,
      finding: {
        kind: r.code === null ? 'crash' : '5xx',
        detail: `exit ${r.code}: ${r.stderr.slice(0, 500)}`,
      },
    };
  };

  // known() may recreate the baseline: always before a settle, never between it and the request.
  let known = await target.known();
  let before = await settle(target);
  for (let i = 0; f.requests < max && Date.now() < deadline; i++) {
    const seed = (Math.imul(options.seed, 0x9e3779b1) + i) | 0;
    const isCli = i % cliEvery === cliEvery - 1;
    let what: string;
    let verdict: Verdict;
    if (isCli) {
      const [c] = fc.sample(cliCaseArb(known), { seed, numRuns: 1 });
      what = `excompact ${c!.args.map((a) => JSON.stringify(a)).join(' ')}`;
      if (c!.input !== undefined) what += ` < ${JSON.stringify(c!.input.slice(0, 300))}`;
      routesSeen.add(c!.command);
      verdict = await judgeCli(c!);
      f.commands++;
    } else {
      const [c] = fc.sample(caseArb(known), { seed, numRuns: 1 });
      const body = c!.raw ?? (c!.body === undefined ? '' : JSON.stringify(c!.body));
      what = `${c!.target} ${c!.method} ${c!.path} ${body.length > 300 ? `${body.slice(0, 300)}…` : body}`;
      routesSeen.add(`${c!.target} ${c!.route}`);
      verdict = await judgeRpc(c!);
      f.rpc++;
    }
    f.requests++;
    if (verdict.rejected) f.rejected++;
    else f.accepted++;
    const found = (finding: Omit<Finding, 'what'>): void => {
      findings.push({ ...finding, what });
      options.log?.(`FINDING (${finding.kind}) ${what}\n  ${finding.detail}`);
    };
    if (verdict.finding) found(verdict.finding);

    const dead = target.dead();
    if (dead.length > 0) {
      found({ kind: 'crash', detail: `exited: ${dead.join(', ')}` });
      break;
    }
    if (verdict.rejected) {
      const after = await target.snapshot();
      const changed = diff(before, after);
      if (changed.length > 0)
        found({ kind: 'state changed by a rejected request', detail: changed.join('\n  ') });
      before = after;
    } else {
      known = await target.known();
      before = await settle(target);
    }
    if (i % 50 === 49) {
      known = await target.known();
      before = await settle(target);
      options.log?.(
        `${f.requests} requests, ${f.rejected} rejected, ${f.accepted} accepted, ${findings.length} findings`,
      );
    }
  }
  for (const x of findings) {
    if (x.kind === '5xx') f.serverErrors++;
    else if (x.kind === 'crash') f.crashes++;
    else if (x.kind === 'state changed by a rejected request') f.changedByRejected++;
    else if (x.kind === 'bad error') f.badErrors++;
    else if (x.kind === 'effect missing') f.missingEffects++;
    else f.noAnswer++;
  }
  f.routes = routesSeen.size;
  f.seconds = Math.round((Date.now() - started) / 1_000);
  return { figures: f, findings };
}

/**
 * A snapshot once the cluster is quiet and two snapshots taken 100 ms apart agree (at most ~15 s): what an
 * earlier request set going has finished.
 */
async function settle(target: FuzzTarget): Promise<Map<string, string>> {
  let last = await target.snapshot();
  for (let i = 0; i < 150; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const next = await target.snapshot();
    if (diff(last, next).length === 0 && target.quiet(next)) return next;
    last = next;
  }
  return last;
}

function diff(a: Map<string, string>, b: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [k, v] of a)
    if (b.get(k) !== v) out.push(`${k}: ${v.slice(0, 120)} → ${b.get(k)?.slice(0, 120) ?? '(gone)'}`);
  for (const [k, v] of b) if (!a.has(k)) out.push(`${k}: (new) ${v.slice(0, 120)}`);
  return out;
}

/** The figures as `npm run fuzz` prints them. */
export function formatFigures(f: Figures): string {
  return [
    `seed ${f.seed}, ${f.seconds} s, ${f.routes} routes and commands`,
    `requests: ${f.requests} (${f.rpc} RPC, ${f.commands} admin commands)`,
    `rejected: ${f.rejected}`,
    `accepted: ${f.accepted}`,
    `5xx: ${f.serverErrors}`,
    `crashes: ${f.crashes}`,
    `state changed by a rejected request: ${f.changedByRejected}`,
    `errors without a code and message: ${f.badErrors}`,
    `successes without their documented effect: ${f.missingEffects}`,
    `no answer: ${f.noAnswer}`,
  ].join('\n');
}
