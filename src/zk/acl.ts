/**
 * ZooKeeper access control for an instance.
 *
 * Every node under the instance root is created with a digest ACL for the user `excompact` whose password
 * is derived from the instance secret (so the secret itself is never sent to ZooKeeper). A client that has
 * not authenticated with the same secret can neither read nor change them.
 */
import { createHash, createHmac } from 'node:crypto';
import zookeeper from 'node-zookeeper-client';

const { ACL, Id, Permission } = zookeeper;

export const ZK_DIGEST_USER = 'excompact';

export interface ZkDigestAuth {
  user: string;
  password: string;
}

/** The digest credentials this instance uses, derived from its secret. */
export function digestAuthFromSecret(secret: string): ZkDigestAuth {
  const password = createHmac('sha256', secret).update('excompact/zookeeper-digest/v1').digest('base64url');
  return { user: ZK_DIGEST_USER, password };
}

/** The ACL id ZooKeeper stores for a digest user: `user:base64(sha1(user:password))`. */
export function digestId(auth: ZkDigestAuth): string {
  const hash = createHash('sha1').update(`${auth.user}:${auth.password}`).digest('base64');
  return `${auth.user}:${hash}`;
}

/** Full rights for the instance's digest user, nothing for anyone else. */
export function instanceAcl(auth: ZkDigestAuth): zookeeper.ACL[] {
  return [new ACL(Permission.ALL, new Id('digest', digestId(auth)))];
}

/** World-open ACL, only for instances run without a secret (never the default). */
export function openAcl(): zookeeper.ACL[] {
  return [new ACL(Permission.ALL, new Id('world', 'anyone'))];
}
