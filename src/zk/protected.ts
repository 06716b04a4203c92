/**
 * Protected creation (Apache Curator's pattern): a create that survives CONNECTION_LOSS without leaving a
 * second node behind.
 *
 * The node's name carries a fresh UUID (`_c_<uuid>-<name>`). When the create's outcome is unknown, wait for
 * the connection to come back and list the parent: requests of one session are processed in order, so a
 * create that was sent (or is still queued) before the listing is visible to it. If a node with our UUID is
 * there it is ours; otherwise the create never happened and is sent again.
 *
 * The connection may come back to another server of the ensemble, one that has not yet applied a create
 * the old one forwarded: before listing, a write through the leader (a multi checking the parent at any
 * version) makes it apply everything committed before, so the listing cannot miss the create and make a
 * second node.
 */
import { randomUUID } from 'node:crypto';
import { ExcError } from '../errors.js';
import { isZkCode } from './errors.js';
import type { ZkCreateMode, ZkSession } from './session.js';

const MAX_ATTEMPTS = 5;

export interface ProtectedCreateResult {
  path: string;
  /** How many times the outcome was unknown and had to be recovered (for tests and logs). */
  recoveries: number;
}

export async function createProtected(
  session: ZkSession,
  parent: string,
  name: string,
  data: Buffer | string,
  mode: ZkCreateMode = 'ephemeral-sequential',
): Promise<ProtectedCreateResult> {
  const marker = `_c_${randomUUID()}-`;
  let recoveries = 0;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    try {
      const path = await session.create(`${parent}/${marker}${name}`, data, mode);
      return { path, recoveries };
    } catch (err) {
      if (!outcomeUnknown(err)) throw err;
      recoveries++;
      const found = await recover(session, parent, marker);
      if (found) return { path: found, recoveries };
    }
  }
  throw new ExcError(
    'ZK_CONNECTION_LOSS',
    `could not create a node under ${parent} after ${MAX_ATTEMPTS} attempts`,
    {
      details: { path: parent },
    },
  );
}

const outcomeUnknown = (err: unknown): boolean =>
  isZkCode(err, 'ZK_CONNECTION_LOSS') || isZkCode(err, 'ZK_TIMEOUT');

/** Whether the create carrying `marker` happened (its path) or not, once the connection is back. */
async function recover(session: ZkSession, parent: string, marker: string): Promise<string | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      await session.whenConnected();
      await session.multi([{ op: 'check', path: parent, version: -1 }]);
      return await findOwn(session, parent, marker);
    } catch (err) {
      if (!outcomeUnknown(err) || attempt >= MAX_ATTEMPTS) throw err;
    }
  }
}

/** The node carrying `marker` if this session owns it; one left by another session is deleted. */
async function findOwn(session: ZkSession, parent: string, marker: string): Promise<string | undefined> {
  const child = (await session.children(parent)).find((c) => c.startsWith(marker));
  if (!child) return undefined;
  const path = `${parent}/${child}`;
  const stat = await session.exists(path);
  if (!stat) return undefined;
  if (stat.ephemeralOwner === session.sessionId || stat.ephemeralOwner === '0000000000000000') return path;
  await session.delete(path).catch((err: unknown) => {
    if (!isZkCode(err, 'ZK_NO_NODE')) throw err;
  });
  return undefined;
}
