/**
 * How MetaClient groups concurrent callers' mutations into requests of the manager's mutate route
 * (src/manager/api.ts). A request carries one fence, so only callers with the same fence share one; each
 * caller's mutations go whole in one request, in arrival order; and no request is refused for its size
 * on account of others: none has more than {@link MAX_MUTATIONS_PER_REQUEST} mutations, nor a body over
 * the RPC body limit. A caller alone over the body limit goes alone, and is refused alone.
 *
 * Each caller's mutations are checked with the route's own schema before they are grouped (client.ts),
 * so the route refuses a grouped request only for what concerns it whole.
 */
import type { Fence } from './tablet.js';
import { MAX_MUTATIONS_PER_REQUEST, type Mutation } from './types.js';

/** The default of EXC_RPC_MAX_BODY_BYTES: the largest body the manager takes. */
export const DEFAULT_MAX_BODY_BYTES = 16 << 20;

/**
 * Mutations per request the grouping aims at: enough to share one round trip, few enough that one
 * request stays quick. A caller with more goes alone (the route takes up to {@link MAX_MUTATIONS_PER_REQUEST}).
 */
export const GROUP_MUTATIONS = 1_000;

export interface Caller {
  mutations: Mutation[];
  fence?: Fence;
  /** UTF-8 bytes of `JSON.stringify(mutations)`. */
  bytes: number;
}

export interface Group<C extends Caller> {
  fence?: Fence;
  callers: C[];
  /** Mutations of every caller. */
  count: number;
  /** UTF-8 bytes of the request's body, `{"mutations":[…],"fence":…}`, exactly. */
  bodyBytes: number;
}

export function groupCallers<C extends Caller>(
  callers: readonly C[],
  options: { maxBodyBytes?: number; groupMutations?: number } = {},
): Group<C>[] {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const groupMutations = Math.min(options.groupMutations ?? GROUP_MUTATIONS, MAX_MUTATIONS_PER_REQUEST);
  const groups: Group<C>[] = [];
  /** The group still taking callers, by fence. */
  const open = new Map<string, Group<C>>();
  for (const caller of callers) {
    const key = caller.fence ? `${caller.fence.server}/${caller.fence.session}` : '';
    // The caller's mutations join the body's array: without their own brackets, after a comma.
    const added = caller.bytes - 2;
    let group = open.get(key);
    const fits =
      group !== undefined &&
      group.count + caller.mutations.length <= groupMutations &&
      group.bodyBytes + 1 + added <= maxBodyBytes;
    if (!group || !fits) {
      const envelope = Buffer.byteLength(JSON.stringify({ mutations: [], fence: caller.fence }));
      group = { fence: caller.fence, callers: [], count: 0, bodyBytes: envelope - 1 };
      open.set(key, group);
      groups.push(group);
    }
    group.callers.push(caller);
    group.count += caller.mutations.length;
    group.bodyBytes += 1 + added;
  }
  return groups;
}
