/**
 * Queue ids and queue deletions cut short. Tablet servers, `~cq` rows and reservations name a queue by its
 * id, and tablet servers read a queue's bins once per queue: an id given again to a new queue must not
 * route with the old queue's bins, and ids are not given again at all. A deletion in steps (a queue with
 * more compactors than one multi deletes) that lost its manager half-way left the queue's node and its
 * compactors for ever, with no name to delete it by; the active manager finishes it.
 */
import { describe, expect, it } from 'vitest';
import { Registration } from '../../src/compactor/registration.js';
import { silentLogger } from '../../src/log.js';
import { formatId } from '../../src/meta/keys.js';
import { removeOrphanQueueNodes } from '../../src/queue/orphans.js';
import { createQueue, deleteQueue, nextQueueId, readQueueMap } from '../../src/queue/registry.js';
import { QueueResolver } from '../../src/queue/resolver.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../../src/zk/index.js';
import { uniqueName, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const auth = digestAuthFromSecret('queue-ids-test-secret-0123456789');

describe('queue ids', () => {
  it('nextQueueId - the counter value as 4 base-36 digits, skipping ids in use, wrapping at 36^4', () => {
    expect(nextQueueId(1, new Set())).toBe('0001');
    expect(nextQueueId(1, new Set(['0001', '0002']))).toBe('0003');
    expect(nextQueueId(36 ** 4 - 1, new Set(['zzzz']))).toBe('0000');
    expect(nextQueueId(36 ** 4 + 5, new Set())).toBe(formatId(5));
  });
});

describe('queue ids - in ZooKeeper', () => {
  const zk = useZooKeeper();
  const connect = () =>
    ZkSession.connect({ connectString: zk().connectString, sessionTimeoutMs: 10_000, auth });

  async function withLayout(fn: (s: ZkSession, layout: ZkLayout) => Promise<void>): Promise<void> {
    const layout = new ZkLayout(`/${uniqueName('qid')}`);
    const session = await connect();
    try {
      await ensureLayout(session, layout);
      await fn(session, layout);
    } finally {
      await session.close();
    }
  }

  it('create - a queue created after others were deleted never gets one of their ids', () =>
    withLayout(async (session, layout) => {
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) {
        ids.push((await createQueue(session, layout, i % 2 === 0 ? 'a' : 'b', 2)).id);
        await deleteQueue(session, layout, i % 2 === 0 ? 'a' : 'b');
      }
      expect(new Set(ids).size).toBe(ids.length);
    }));

  it('create - an id held by a leftover queue node is skipped, the leftover left alone', () =>
    withLayout(async (session, layout) => {
      const { version } = await readQueueMap(session, layout);
      // The next two ids taken by nodes no name maps to (as random ids of an older version could be).
      for (const n of [1, 2]) await session.create(layout.queueNode(formatId(version + n)), '{"bins":9}');
      const q = await createQueue(session, layout, 'q', 3);
      expect(q.id).toBe(formatId(version + 3));
      expect(
        JSON.parse((await session.get(layout.queueNode(formatId(version + 1)))).data.toString()),
      ).toEqual({ bins: 9 });
    }));

  it('resolver - a name mapped to an id it saw for another queue routes with the new queue’s bins', () =>
    withLayout(async (session, layout) => {
      const resolver = new QueueResolver(session, layout, silentLogger(), 60_000);
      await resolver.start();
      try {
        const old = await createQueue(session, layout, 'old', 2);
        await resolver.refresh();
        expect(resolver.byQueueName('old')?.bins).toBe(2);
        await deleteQueue(session, layout, 'old');
        await resolver.refresh();
        expect(resolver.byQueueName('old')).toBeUndefined();
        // The same id given to another queue with other bins (what random ids allowed).
        const { version } = await readQueueMap(session, layout);
        await session.multi([
          { op: 'set', path: layout.queues, data: JSON.stringify({ new: old.id }), version },
          { op: 'create', path: layout.queueNode(old.id), data: JSON.stringify({ bins: 5 }) },
        ]);
        await resolver.refresh();
        expect(resolver.byQueueName('new')).toEqual({ name: 'new', id: old.id, bins: 5 });
      } finally {
        await resolver.stop();
      }
    }));

  it('orphans - a queue node whose name is gone is deleted with its compactors, who see their queue go; named queues stay', () =>
    withLayout(async (session, layout) => {
      const workers = await connect();
      try {
        const gone = await createQueue(session, layout, 'gone', 2);
        const kept = await createQueue(session, layout, 'kept', 2);
        const registration = await Registration.register(
          workers,
          layout,
          'gone',
          { version: 'test' },
          silentLogger(),
        );
        const events: string[] = [];
        registration.on('nodeLost', () => events.push('nodeLost'));
        registration.on('queueDeleted', () => events.push('queueDeleted'));
        await registration.watch();
        const keptCompactor = await Registration.register(
          workers,
          layout,
          'kept',
          { version: 'test' },
          silentLogger(),
        );
        // A deletion in steps cut short after its first step: the name is gone, the nodes are not.
        const { map, version } = await readQueueMap(session, layout);
        map.delete('gone');
        await session.set(layout.queues, JSON.stringify(Object.fromEntries(map)), version);

        expect(await removeOrphanQueueNodes(session, layout, silentLogger())).toEqual([gone.id]);
        expect(await session.exists(layout.queueNode(gone.id))).toBeNull();
        expect(await session.exists(layout.queueNode(kept.id))).not.toBeNull();
        expect(await session.exists(keptCompactor.path)).not.toBeNull();
        await expect.poll(() => events.length).toBeGreaterThan(0);
        // Nothing left: a second sweep finds nothing.
        expect(await removeOrphanQueueNodes(session, layout, silentLogger())).toEqual([]);
      } finally {
        await workers.close();
      }
    }));
});

describe('queue deletions cut short - the manager', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('activation - a manager that becomes active finishes a queue deletion its predecessor left half-done', async () => {
    const c = cluster();
    const session = await c.session();
    await ensureLayout(session, c.layout);
    const queue = await createQueue(session, c.layout, 'half', 2);
    const compactor = await session.create(
      `${c.layout.queueNode(queue.id)}/c-`,
      '{}',
      'ephemeral-sequential',
    );
    const { map, version } = await readQueueMap(session, c.layout);
    map.delete('half');
    await session.set(c.layout.queues, JSON.stringify(Object.fromEntries(map)), version);

    await c.startManager();
    await waitFor(
      async () => (await session.exists(c.layout.queueNode(queue.id))) === null,
      'the queue node deleted',
      15_000,
    );
    expect(await session.exists(compactor)).toBeNull();
  });
});
