/**
 * The compactor's side of the links (src/tserver/compactor-links.ts): one long-lived request to each
 * tablet server it reserves on or holds jobs on, open from just before a reserve until a while after its
 * last job there ended. Its only message is its existence: when this process dies, the kernel closes it,
 * and the tablet server fences this compactor within a fraction of a second instead of waiting for the
 * ZooKeeper session to expire.
 *
 * A link that breaks while wanted is opened again at once (the tablet server allows a short grace), and
 * one that the server ends (it is stopping) too, to wherever the job's tablet goes next. Links belong to
 * one registration (node path): a new registration closes the old one's links.
 */
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';

/** About 24 days: the longest timer Node keeps; the link is meant to last as long as it is wanted. */
const FOREVER_MS = 2 ** 31 - 1;

interface Link {
  users: number;
  abort: AbortController;
  linger: NodeJS.Timeout | undefined;
}

export class Links {
  private readonly links = new Map<string, Link>();

  constructor(
    private readonly peers: PeerClients,
    /** This registration's node path. */
    private readonly compactor: string,
    private readonly log: Logger,
    /** Keep an unused link this long before closing it (the next reserve there reuses it). */
    private readonly lingerMs = 30_000,
  ) {}

  /** Uses a link to `server` until the returned release is called (once). */
  use(server: string): () => void {
    let link = this.links.get(server);
    if (!link) {
      link = { users: 0, abort: new AbortController(), linger: undefined };
      this.links.set(server, link);
      void this.keep(server, link);
    }
    clearTimeout(link.linger);
    link.users++;
    let released = false;
    const l = link;
    return () => {
      if (released) return;
      released = true;
      if (--l.users > 0) return;
      l.linger = setTimeout(() => this.drop(server, l), this.lingerMs);
      l.linger.unref();
    };
  }

  /** Closes every link at once. */
  close(): void {
    for (const [server, link] of this.links) this.drop(server, link);
  }

  private drop(server: string, link: Link): void {
    clearTimeout(link.linger);
    if (this.links.get(server) === link) this.links.delete(server);
    link.abort.abort();
  }

  /** Holds the link open, opening it again whenever it ends while wanted. */
  private async keep(server: string, link: Link): Promise<void> {
    const { signal } = link.abort;
    for (let attempt = 0; !signal.aborted; attempt++) {
      const started = Date.now();
      try {
        await this.peers
          .get(server)
          .post('/v1/link', { compactor: this.compactor }, { attempts: 1, timeoutMs: FOREVER_MS, signal });
      } catch (err) {
        if (signal.aborted) return;
        this.log.debug({ server, err: describeError(err) }, 'link to a tablet server ended; linking again');
      }
      // A link that lasted was fine: start over from a short wait; one that keeps failing backs off.
      if (Date.now() - started > 5_000) attempt = 0;
      await sleep(attempt === 0 ? 0 : backoffDelay(attempt, { baseMs: 50, maxMs: 2_000 }), signal).catch(
        () => undefined,
      );
    }
  }
}
