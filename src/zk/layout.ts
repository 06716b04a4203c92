/**
 * The ZooKeeper layout of an instance (DESIGN.md, "ZooKeeper layout"). Every path is built here.
 */
import { ExcError } from '../errors.js';
import { isZkCode } from './errors.js';
import type { ZkSession } from './session.js';

export class ZkLayout {
  constructor(readonly root: string) {}

  /** JSON map queue name → queue id. */
  get queues(): string {
    return `${this.root}/queues`;
  }
  get compactors(): string {
    return `${this.root}/compactors`;
  }
  /** Parent of a queue's live compactors; its data holds the queue's settings. */
  queueNode(queueId: string): string {
    return `${this.compactors}/${queueId}`;
  }
  get tservers(): string {
    return `${this.root}/tservers`;
  }
  tserverNode(hostPort: string): string {
    return `${this.tservers}/${hostPort}`;
  }
  get manager(): string {
    return `${this.root}/manager`;
  }
}

/**
 * Creates the persistent skeleton of an instance where it is missing, and refuses one that exists without
 * the instance's ACL. ZooKeeper checks the rights to create and delete a node on its parent: a root made
 * beforehand with the world's ACL (`create /excompact` in zkCli) would let anyone without the secret
 * replace the manager's node or the queues' map under it.
 */
export async function ensureLayout(session: ZkSession, layout: ZkLayout): Promise<void> {
  await session.ensurePath(layout.root);
  await session.ensurePath(layout.compactors);
  await session.ensurePath(layout.tservers);
  try {
    await session.create(layout.queues, '{}');
  } catch (err) {
    if (!isZkCode(err, 'ZK_NODE_EXISTS')) throw err;
  }
  for (const path of [layout.root, layout.compactors, layout.tservers, layout.queues]) {
    if (!(await session.hasOwnAcl(path))) {
      throw new ExcError(
        'CONFIG_INVALID',
        `ZooKeeper node ${path} exists without this instance's ACL (created by hand, or by an instance ` +
          'with another secret): anyone could change what lies under it. Delete it, or name another ' +
          'EXC_ZK_ROOT, and start again.',
        { details: { path } },
      );
    }
  }
}
