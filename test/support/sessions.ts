/**
 * Forcing a ZooKeeper session to expire (there is no server command for it).
 *
 * Hijack: a second client attaches to the victim's session with its id and password, then closes it; the
 * server ends the session and deletes its ephemeral nodes at once. Cut the victim off first (a
 * {@link TcpProxy} blackhole, or SIGSTOP of its process), or it may re-attach before the close lands. The
 * victim learns of the expiry when it reconnects.
 */
import { ZkSession } from '../../src/zk/session.js';

export async function expireSession(
  connectString: string,
  victim: { sessionId: string; sessionPassword: Buffer },
): Promise<void> {
  const hijacker = await ZkSession.connect({
    connectString,
    sessionTimeoutMs: 10_000,
    watchdog: false,
    resume: { sessionId: Buffer.from(victim.sessionId, 'hex'), password: victim.sessionPassword },
  });
  if (hijacker.sessionId !== victim.sessionId) {
    await hijacker.close();
    throw new Error(
      `could not attach to session ${victim.sessionId} (got ${hijacker.sessionId}); it has already expired?`,
    );
  }
  await hijacker.close();
}
