/**
 * Finishing queue deletions cut short. A queue with more compactors than one multi deletes loses its name
 * first and its node in steps (registry.ts, deleteQueue); a manager that died or lost ZooKeeper between the
 * two left the node and its compactors' nodes for ever, and the operator could not delete it again (the
 * name was gone). The active manager finishes such deletions: when it becomes active and then
 * periodically.
 */
import { Coalesced } from '../coalesce.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { QUEUE_ID_RE } from '../meta/keys.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';
import { readQueueMap, removeQueueNode } from './registry.js';

/**
 * Deletes every queue node whose id no name maps to, with its compactors' nodes; returns their ids.
 *
 * The nodes are listed before the map is read: a queue's name and node are created in one multi, so a node
 * listed here whose id a later read of the map lacks has lost its name, and is being deleted. (Read the
 * other way round, a queue created in between would look nameless.)
 */
export async function removeOrphanQueueNodes(
  session: ZkSession,
  layout: ZkLayout,
  log: Logger,
): Promise<string[]> {
  const ids = await session.children(layout.compactors);
  const { map } = await readQueueMap(session, layout);
  const named = new Set(map.values());
  const orphans = ids.filter((id) => QUEUE_ID_RE.test(id) && !named.has(id));
  for (const queueId of orphans) {
    log.info({ queueId }, 'finishing the deletion of a queue whose name is gone');
    try {
      await removeQueueNode(session, layout, queueId);
    } catch (err) {
      if (!isZkCode(err, 'ZK_NO_NODE')) throw err;
    }
  }
  return orphans;
}

/** Runs {@link removeOrphanQueueNodes} at once and then every `everyMs`, one run at a time. */
export class OrphanQueueSweeper {
  private timer: NodeJS.Timeout | undefined;
  private readonly runs: Coalesced;
  /** Queue nodes removed so far (for /status and tests). */
  removed = 0;

  constructor(
    session: ZkSession,
    layout: ZkLayout,
    private readonly log: Logger,
    private readonly everyMs = 60_000,
  ) {
    this.runs = new Coalesced(
      async () => {
        this.removed += (await removeOrphanQueueNodes(session, layout, log)).length;
      },
      (err) => log.warn({ err: describeError(err) }, 'finishing queue deletions failed'),
    );
  }

  start(): void {
    this.timer = setInterval(() => void this.runs.run(), this.everyMs);
    this.timer.unref();
    void this.runs.run();
  }

  /** Runs one sweep now (or joins the one running, and one more after it). */
  sweep(): Promise<void> {
    return this.runs.run();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.runs.stop();
  }
}
