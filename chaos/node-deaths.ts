/**
 * When every compactor node went, as ZooKeeper tells it: whatever ended it (an expired session, a kill,
 * a tablet server fencing a compactor whose link closed, a deletion from outside, a compactor closing its
 * own session). The checks then refuse any commit of that compactor's accepted well after its node went.
 *
 * Polled (every 250 ms by the run), not watched: a poll survives the harness's own session being replaced,
 * and a late poll only records a death later than it was (a laxer judgement, never a false one).
 */
import { isZkCode, type ZkLayout, type ZkSession } from '../src/zk/index.js';

export interface NodeDeath {
  /** The compactor's node path, and when a poll first found it gone. */
  compactor: string;
  at: number;
}

export class NodeDeaths {
  readonly deaths: NodeDeath[] = [];
  private readonly alive = new Set<string>();

  constructor(
    private readonly session: () => ZkSession,
    private readonly layout: ZkLayout,
  ) {}

  /**
   * Lists every queue's compactors; a node listed before and missing now went since the last poll. A poll
   * that fails (ZooKeeper unreachable) changes nothing: the next one sees it all.
   */
  async poll(): Promise<void> {
    const session = this.session();
    const now = new Set<string>();
    try {
      for (const queue of await session.children(this.layout.compactors)) {
        const dir = `${this.layout.compactors}/${queue}`;
        const nodes = await session.children(dir).catch((err: unknown) => {
          if (isZkCode(err, 'ZK_NO_NODE')) return []; // the queue was deleted meanwhile
          throw err;
        });
        for (const node of nodes) now.add(`${dir}/${node}`);
      }
    } catch {
      return;
    }
    const at = Date.now();
    for (const node of this.alive) {
      if (now.has(node)) continue;
      this.alive.delete(node);
      this.deaths.push({ compactor: node, at });
    }
    for (const node of now) this.alive.add(node);
  }
}
