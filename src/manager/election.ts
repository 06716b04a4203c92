/**
 * Leader election for managers: the active manager holds the ephemeral node /excompact/manager, whose data
 * says where it serves. Others wait, watching the node, and race to create it when it goes. The race has
 * one winner (create is atomic); the node's `ephemeralOwner` tells a winner whose create answered
 * CONNECTION_LOSS that the node is in fact its own.
 */
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ManagerAddress } from '../meta/discovery.js';
import { isZkCode, type ZkLayout, type ZkSession, type ZkWatchEvent } from '../zk/index.js';

/** Resolves once this session holds the manager node; rejects if the session is lost or `signal` aborts. */
export async function becomeManager(
  session: ZkSession,
  layout: ZkLayout,
  address: ManagerAddress,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  let announced = false;
  for (;;) {
    signal.throwIfAborted();
    try {
      await session.create(layout.manager, JSON.stringify(address), 'ephemeral');
      return;
    } catch (err) {
      if (!isZkCode(err, 'ZK_NODE_EXISTS') && !isZkCode(err, 'ZK_CONNECTION_LOSS')) throw err;
      if (isZkCode(err, 'ZK_CONNECTION_LOSS')) await session.whenConnected();
    }
    let fire: () => void = () => undefined;
    const changed = new Promise<void>((resolve) => (fire = resolve));
    const watcher = (_event: ZkWatchEvent): void => fire();
    const stat = await session.exists(layout.manager, watcher);
    if (stat?.ephemeralOwner === session.sessionId) return;
    if (!stat) continue;
    if (!announced) {
      const { data } = await session.get(layout.manager).catch(() => ({ data: Buffer.from('{}') }));
      log.info({ active: data.toString('utf8') }, 'another manager is active: standing by');
      announced = true;
    }
    await waitFor(changed, session, signal);
  }
}

function waitFor(changed: Promise<void>, session: ZkSession, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onLost = (): void => {
      cleanup();
      reject(new ExcError('ZK_SESSION_LOST', 'zookeeper session lost while standing by'));
    };
    const onAbort = (): void => {
      cleanup();
      reject(signal.reason as Error);
    };
    const cleanup = (): void => {
      session.off('lost', onLost);
      signal.removeEventListener('abort', onAbort);
    };
    session.once('lost', onLost);
    signal.addEventListener('abort', onAbort, { once: true });
    void changed.then(() => {
      cleanup();
      resolve();
    });
  });
}
