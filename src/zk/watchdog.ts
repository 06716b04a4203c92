/**
 * The session's watchdog (ZOOKEEPER-NOTES.md, 4): the client has no read timeout, so a server that stops
 * answering without closing the TCP connection (paused, overloaded, cut off by a network that drops
 * packets) would leave the session "connected" forever. Every sixth of the session timeout the watchdog
 * sends a cheap request; silence for a third of it means the connection is dead. That leaves at least
 * half the timeout to reach another server before the session expires; a false alarm (a slow answer on a
 * loaded machine) costs only a reconnection.
 *
 * What to do then is the session's decision (session.ts): it drops the connection and lets the client
 * find another server of the ensemble, keeping the session — a paused follower or a frozen leader is not
 * a reason to lose it — and the session is lost only if no server takes it back in time.
 */
import { ExcError } from '../errors.js';
import { withTimeout } from '../retry.js';

export interface WatchdogOptions {
  sessionTimeoutMs: number;
  /** One cheap request to the server (e.g. `exists('/')`). */
  probe: () => Promise<void>;
  /** A probe was answered: the server was heard from. */
  onHeard: () => void;
  /** No answer within the probe timeout. */
  onSilent: (probeTimeoutMs: number) => void;
}

export class Watchdog {
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;

  constructor(private readonly options: WatchdogOptions) {}

  start(): void {
    if (this.timer) return;
    const { sessionTimeoutMs } = this.options;
    const interval = Math.max(50, Math.floor(sessionTimeoutMs / 6));
    const probeTimeout = Math.max(100, Math.floor(sessionTimeoutMs / 3));
    this.timer = setInterval(() => {
      if (this.inFlight) return;
      this.inFlight = true;
      withTimeout(this.options.probe(), probeTimeout)
        .then(
          () => this.options.onHeard(),
          (err: unknown) => {
            // Only silence counts. A connection loss is seen by the session itself, through the client.
            if (err instanceof ExcError && err.code === 'TIMEOUT' && this.timer)
              this.options.onSilent(probeTimeout);
          },
        )
        .finally(() => {
          this.inFlight = false;
        });
    }, interval);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
