/**
 * Load requests to tablet servers: the tablets waiting for one server go in requests of up to `batch`,
 * at most `inFlight` of them at once, in the order they were asked for.
 *
 * Sent one request per tablet and all at once, the loads of thousands of tablets (a new table, a dead
 * server's tablets) timed out on the server that had to read and write each one, were sent again, and
 * the manager spent most of its time on requests that failed: at 10,000 new tablets, 39 s to host them,
 * a quarter of the manager's time in garbage collection. A load already waiting or in flight for the
 * same tablet, server and session is not queued again.
 */
import type { Location } from '../meta/tablet.js';

interface ServerQueue {
  loc: Location;
  /** Key → tablet, in the order asked. */
  waiting: Map<string, string>;
  inFlight: number;
}

export class LoadSender {
  /** By server and session. */
  private readonly servers = new Map<string, ServerQueue>();
  /** Every load waiting or in flight. */
  private readonly keys = new Set<string>();

  constructor(
    private readonly send: (tablets: string[], loc: Location) => Promise<void>,
    private readonly options: { batch?: number; inFlight?: number } = {},
  ) {}

  /** Whether a load of `tablet` on `loc` is waiting or in flight. */
  has(tablet: string, loc: Location): boolean {
    return this.keys.has(key(tablet, loc));
  }

  enqueue(tablet: string, loc: Location): void {
    const k = key(tablet, loc);
    if (this.keys.has(k)) return;
    this.keys.add(k);
    const at = `${loc.server}\n${loc.session}`;
    let q = this.servers.get(at);
    if (!q) this.servers.set(at, (q = { loc, waiting: new Map(), inFlight: 0 }));
    q.waiting.set(k, tablet);
    // In a later turn: the loads a pass asks for in one go share requests.
    if (q.waiting.size === 1) setImmediate(() => this.pump(at, q));
  }

  private pump(at: string, q: ServerQueue): void {
    const batch = this.options.batch ?? 500;
    while (q.waiting.size > 0 && q.inFlight < (this.options.inFlight ?? 4)) {
      const taken = [...q.waiting].slice(0, batch);
      for (const [k] of taken) q.waiting.delete(k);
      q.inFlight++;
      void this.send(
        taken.map(([, tablet]) => tablet),
        q.loc,
      )
        .catch(() => undefined)
        .finally(() => {
          q.inFlight--;
          for (const [k] of taken) this.keys.delete(k);
          if (q.inFlight === 0 && q.waiting.size === 0) this.servers.delete(at);
          else this.pump(at, q);
        });
    }
  }
}

const key = (tablet: string, loc: Location): string => `${tablet}\n${loc.server}\n${loc.session}`;
