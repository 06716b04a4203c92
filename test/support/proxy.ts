/**
 * A loopback TCP proxy in front of a server, to cut a client off without touching either process:
 *
 * - `blackhole()`: keep connections open but forward nothing (packets "vanish", as in a partition);
 * - `dropConnections()`: reset every connection (the client sees a disconnect and reconnects);
 * - `refuse(true)`: refuse new connections;
 * - `delayAnswers(ms)`: pass the server's answers on `ms` late (in order), as a slow network would;
 * - `cutAfterNextClientData()`: forward the client's next chunk to the server, then drop the connection
 *   before any answer comes back (the client cannot know whether its request was applied);
 * - `cutEachConnectionAfter(n)`: the same cut on every connection, at the client's chunk n + 1: its first
 *   n chunks (say, a ZooKeeper handshake) go through, the next request is lost with its connection;
 * - `cutAfterClientData(match)`: the same cut after the first client chunk `match` accepts (a PostgreSQL
 *   COMMIT, say), whichever connection it comes on.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private blackholed = false;
  private refusing = false;
  private answerDelayMs = 0;
  private cutArmed = false;
  private cutEachAfter: number | undefined;
  private cutMatch: ((chunk: Buffer) => boolean) | undefined;
  /** Set when a cut happened (the chunk that triggered it was forwarded). */
  cuts = 0;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
    return this;
  }

  blackhole(): void {
    this.blackholed = true;
  }

  restore(): void {
    this.blackholed = false;
    this.refusing = false;
  }

  /** From now on, every chunk the server sends reaches the client `ms` later (0: at once). */
  delayAnswers(ms: number): void {
    this.answerDelayMs = ms;
  }

  refuse(on = true): void {
    this.refusing = on;
  }

  dropConnections(): void {
    for (const pair of this.pairs) {
      pair.client.resetAndDestroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
  }

  cutAfterNextClientData(): void {
    this.cutArmed = true;
  }

  /** Cuts the connection of the next client chunk that `match` accepts, once it is forwarded. */
  cutAfterClientData(match: (chunk: Buffer) => boolean): void {
    this.cutMatch = match;
  }

  /** Cuts every connection opened from now on at the client's chunk `chunks + 1`; undefined stops it. */
  cutEachConnectionAfter(chunks: number | undefined): void {
    this.cutEachAfter = chunks;
  }

  async stop(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(client: Socket): void {
    if (this.refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(this.targetPort, this.targetHost);
    const pair = { client, upstream };
    this.pairs.add(pair);
    const cutAt = this.cutEachAfter === undefined ? undefined : this.cutEachAfter + 1;
    let chunks = 0;
    const close = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (this.blackholed) return;
      upstream.write(chunk);
      chunks++;
      const matched = this.cutMatch?.(chunk) === true;
      if (this.cutArmed || chunks === cutAt || matched) {
        this.cutArmed = false;
        if (matched) this.cutMatch = undefined;
        this.cuts++;
        // Stop relaying answers at once, and drop the client once the server had time to apply the request.
        upstream.pause();
        setTimeout(() => {
          client.resetAndDestroy();
          upstream.destroy();
          this.pairs.delete(pair);
        }, 100);
      }
    });
    upstream.on('data', (chunk) => {
      if (this.blackholed) return;
      // Timers of one duration fire in the order they were set: the answers stay in order.
      if (this.answerDelayMs > 0) {
        setTimeout(() => {
          if (!client.destroyed) client.write(chunk);
        }, this.answerDelayMs);
      } else client.write(chunk);
    });
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  }
}

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  return new TcpProxy(targetHost, targetPort).start();
}
