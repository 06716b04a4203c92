/**
 * Asking the compactors that hold reservations here but have no link to this server whether they are
 * still there (DESIGN.md, "Liveness").
 *
 * A compactor links to a tablet server when it reserves there (compactor-links.ts), and its death closes
 * the link. A tablet that came here from another server (its host died, or gave it away) brings
 * reservations whose compactors are linked to the old host; each links here only when its next report or
 * commit finds this server. A compactor that dies before that closes nothing here, and its work waited
 * for its ZooKeeper session to expire: after a tablet server's failover, a crash cost a session timeout
 * instead of a fraction of a second.
 *
 * So every `everyMs` this server asks each such compactor's status endpoint (the address in its node):
 *   - a refused connection means that nothing listens there any more: the process is gone;
 *   - an answer that names another registration means that the port went to a new process;
 * either way the compactor is fenced as one whose link closed is. Anything else proves nothing — an
 * answer from the compactor itself, a timeout (a paused process, a cut network), a name that does not
 * resolve — and the session timeout stays the bound. A status address on a loopback interface is asked
 * only from the host the compactor registered from: from another it would reach that host, where nothing
 * listens, and a live compactor would look dead.
 */
import { hostname } from 'node:os';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';

/** Where a compactor said it can be reached (its node's data). */
export interface CompactorAddress {
  /** Its status endpoint's base URL, `http://host:port`. */
  status: string;
  /** The host name it registered from. */
  host: string;
}

export interface CompactorProbeDeps {
  /** Compactors with reservations here, no link open here and no fencing pending. */
  unlinked: () => string[];
  addressOf: (compactor: string) => CompactorAddress | undefined;
  /** GET /status at `status` (one attempt, a short timeout): the compactor's status document. */
  ask: (status: string) => Promise<unknown>;
  fence: (compactor: string, why: string) => void;
  everyMs: number;
  log: Logger;
  /** This machine's host name (for the loopback rule; tests set it). */
  here?: string;
}

export class CompactorProbe {
  private timer: NodeJS.Timeout | undefined;
  /** Compactors being asked now: one question at a time each. */
  private readonly asking = new Set<string>();

  constructor(private readonly deps: CompactorProbeDeps) {}

  start(): void {
    if (this.deps.everyMs <= 0) return;
    this.timer = setInterval(() => this.round(), this.deps.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private round(): void {
    for (const compactor of this.deps.unlinked()) {
      if (this.asking.has(compactor)) continue;
      const address = this.deps.addressOf(compactor);
      if (address === undefined || !askable(address, this.deps.here)) continue;
      this.asking.add(compactor);
      void this.ask(compactor, address).finally(() => this.asking.delete(compactor));
    }
  }

  private async ask(compactor: string, address: CompactorAddress): Promise<void> {
    let answer: unknown;
    try {
      answer = await this.deps.ask(address.status);
    } catch (err) {
      if (refused(err)) this.deps.fence(compactor, `nothing listens at its address ${address.status}`);
      else this.deps.log.debug({ compactor, err: describeError(err) }, 'compactor probe: no answer');
      return;
    }
    const path = (answer as { compactor?: unknown } | null)?.compactor;
    if (typeof path === 'string' && path !== compactor)
      this.deps.fence(compactor, `its address ${address.status} answers as ${path}`);
  }
}

/** Whether asking `address` from here can tell anything (see the loopback rule above). */
export function askable(address: CompactorAddress, here = hostname()): boolean {
  let host: string;
  try {
    host = new URL(address.status).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return false;
  }
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host);
  return !loopback || address.host === here;
}

/** Whether a failed call's connection was refused (ECONNREFUSED anywhere in its causes). */
export function refused(err: unknown): boolean {
  for (let e = err, depth = 0; e !== null && e !== undefined && depth < 5; depth++) {
    if ((e as { code?: unknown }).code === 'ECONNREFUSED') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
