/**
 * Ending a session this process declared lost on its own ("suspended-too-long": no server answered for a
 * whole timeout). That declaration assumes the server expired the session meanwhile, which is false when
 * the ensemble was electing a leader (or, with one server, restarting): the new leader starts every
 * session's timer again, so the old session — and its ephemeral nodes: the manager node, a tablet
 * server's address, a compactor's registration — would live on for another full timeout after the
 * ensemble is back, a ghost that blocks the election and re-registration, and keeps a dead compactor's
 * reservations from being cancelled. The old client cannot send the close (it was disconnected, and is
 * shut down so that it stops dialling), so a client of its own attaches to the session with its id and
 * password as soon as a server answers, and closes it; or hears that it has expired. Either way the
 * session is over.
 *
 * It runs in the background and never delays the owner's new session; it gives up after
 * {@link REAP_FOR_MS} at least (an ensemble down longer than that leaves the ghost its one timeout, as
 * before). Between attempts it holds nothing that keeps the process alive.
 */
import zookeeper from 'node-zookeeper-client';
import type { Logger } from '../log.js';

const { State } = zookeeper;

/** How long to keep trying, at least (and ten session timeouts when that is longer). */
export const REAP_FOR_MS = 120_000;
const PAUSE_MS = 500;
/** How long one attempt waits for a server to answer. */
const ATTEMPT_MS = 2_000;

export interface LostSession {
  connectString: string;
  /** 8 bytes, as the client gives it. */
  sessionId: Buffer;
  password: Buffer;
  sessionTimeoutMs: number;
  log: Logger;
}

type Outcome = 'closed' | 'expired' | 'unreachable';

/** Ends `lost` on the server as soon as one answers (see the top of the file); returns at once. */
export function endLostSession(lost: LostSession): void {
  const deadline = Date.now() + Math.max(REAP_FOR_MS, 10 * lost.sessionTimeoutMs);
  const session = lost.sessionId.toString('hex');
  void (async () => {
    for (;;) {
      const outcome = await attempt(lost);
      if (outcome !== 'unreachable') {
        lost.log.info({ session, outcome }, 'lost zookeeper session ended on the server');
        return;
      }
      if (Date.now() > deadline) {
        lost.log.warn({ session }, 'could not end the lost zookeeper session: no server answered');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS).unref());
    }
  })().catch((err: unknown) => lost.log.warn({ session, err }, 'ending the lost zookeeper session failed'));
}

/** One attempt: attach and close, hear it expired, or find no server within {@link ATTEMPT_MS}. */
function attempt(lost: LostSession): Promise<Outcome> {
  const client = zookeeper.createClient(lost.connectString, {
    sessionTimeout: lost.sessionTimeoutMs,
    spinDelay: 100,
    retries: 0,
    // Supported by the client but missing from its type definitions (as in connection.ts).
    ...({ sessionId: lost.sessionId, sessionPassword: lost.password } as object),
  }) as RawClient;
  return new Promise<Outcome>((resolve) => {
    let done = false;
    const finish = (outcome: Outcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stopClient(client);
      resolve(outcome);
    };
    // Short: a server coming back can take a connection before it serves, and leave it unanswered; a
    // new attempt, half a second later, connects to it once it does.
    const timer = setTimeout(() => finish('unreachable'), Math.min(ATTEMPT_MS, lost.sessionTimeoutMs));
    timer.unref();
    client.on('state', (state) => {
      if (state === State.SYNC_CONNECTED || state === State.CONNECTED_READ_ONLY) {
        // Attached: the session was alive. Closing it makes the server delete its ephemerals at once; the
        // server drops the connection once it has (or give it a moment, then go).
        client.once('disconnected', () => finish('closed'));
        setTimeout(() => finish('closed'), 2_000).unref();
        client.close();
      } else if (state === State.EXPIRED) {
        finish('expired');
      } else if (state === State.AUTH_FAILED) {
        finish('expired'); // cannot happen without credentials; nothing more to do either way
      }
    });
    client.connect();
  });
}

export type RawClient = zookeeper.Client & {
  connectionManager?: { socket?: { destroy(): void }; connect: () => void };
};

/**
 * Stops a client for good. The library reconnects by itself whenever a socket closes outside its CLOSING
 * state (and a reconnection timer may already be pending), so disable reconnection before dropping the
 * socket; otherwise a dead session could keep dialling, and keep the process alive.
 */
export function stopClient(client: RawClient): void {
  const manager = client.connectionManager;
  if (!manager) return;
  manager.connect = () => undefined;
  try {
    manager.socket?.destroy();
  } catch {
    // already gone
  }
}
