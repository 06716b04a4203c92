/**
 * Finding the active manager: the ephemeral node /excompact/manager holds its address.
 */
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';

export interface ManagerAddress {
  host: string;
  port: number;
  pid: number;
  since: number;
}

/** The active manager's address, or undefined when none is active. */
export async function readManagerAddress(
  session: ZkSession,
  layout: ZkLayout,
): Promise<ManagerAddress | undefined> {
  try {
    const { data } = await session.get(layout.manager);
    return JSON.parse(data.toString('utf8')) as ManagerAddress;
  } catch (err) {
    if (isZkCode(err, 'ZK_NO_NODE')) return undefined;
    throw err;
  }
}
