/**
 * A queue with more compactors than one ZooKeeper request can delete: ZooKeeper drops the connection of a
 * request over its 1 MiB limit instead of answering, so `admin queue delete` of a queue with about 10,000
 * compactors once failed with CONNECTION_LOSS (found by bench/scale.ts zk) — and the error named every
 * one of the 10,000 operations.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { Registration } from '../../src/compactor/registration.js';
import {
  ONE_MULTI_MAX_COMPACTORS,
  createQueue,
  deleteQueue,
  readQueueMap,
  removeQueueNode,
} from '../../src/queue/registry.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../../src/zk/index.js';
import { uniqueName, useZooKeeper } from '../support/index.js';

const auth = digestAuthFromSecret('registry-large-test-secret-0123456789');

describe('queue registry - many compactors', () => {
  const zk = useZooKeeper();
  const connect = () =>
    ZkSession.connect({ connectString: zk().connectString, sessionTimeoutMs: 10_000, auth });

  it('delete - a queue with more compactors than one multi holds is deleted, and its compactors find it gone', async () => {
    const layout = new ZkLayout(`/${uniqueName('reg')}`);
    const admin = await connect();
    const workers = await connect();
    try {
      await ensureLayout(admin, layout);
      const queue = await createQueue(admin, layout, 'big', 2);
      // One real registration (what a compactor does), and enough other compactor nodes to need steps.
      const registration = await Registration.register(
        workers,
        layout,
        'big',
        { version: 'test' },
        silentLogger(),
      );
      const events: string[] = [];
      registration.on('nodeLost', () => events.push('nodeLost'));
      registration.on('queueDeleted', () => events.push('queueDeleted'));
      await registration.watch();
      // 12,000 compactor nodes named as compactors name theirs: in one multi, over ZooKeeper's limit.
      const extra = 12_000;
      expect(extra).toBeGreaterThan(ONE_MULTI_MAX_COMPACTORS);
      for (let i = 0; i < extra; i += 250)
        await Promise.all(
          Array.from({ length: Math.min(250, extra - i) }, () =>
            workers.create(
              `${layout.queueNode(queue.id)}/_c_${randomUUID()}-c-`,
              '{}',
              'ephemeral-sequential',
            ),
          ),
        );
      expect((await admin.children(layout.queueNode(queue.id))).length).toBe(extra + 1);

      expect(await deleteQueue(admin, layout, 'big')).toEqual({ name: 'big', id: queue.id, bins: 2 });
      expect((await readQueueMap(admin, layout)).map.has('big')).toBe(false);
      expect(await admin.exists(layout.queueNode(queue.id))).toBeNull();
      // The compactor saw its node or the queue's go, and registering again says the queue is gone.
      await expect.poll(() => events.length).toBeGreaterThan(0);
      await expect(
        Registration.register(workers, layout, 'big', { version: 'test' }, silentLogger()),
      ).rejects.toMatchObject({ code: 'UNKNOWN_QUEUE' });
      // Finishing a deletion that is already finished is fine (a retried request does it).
      await removeQueueNode(admin, layout, queue.id);
    } finally {
      await workers.close();
      await admin.close();
    }
  });

  it('multi - a request over the server limit is refused before it is sent, briefly, and the session goes on', async () => {
    const session = await connect();
    try {
      const ops = Array.from({ length: 12_000 }, (_, i) => ({
        op: 'delete' as const,
        path: `/${uniqueName('none')}/_c_00000000-0000-0000-0000-000000000000-c-${String(i).padStart(10, '0')}`,
        version: -1,
      }));
      const err = (await session.multi(ops).catch((e: unknown) => e)) as Error & { code: string };
      expect(err.code).toBe('BAD_REQUEST');
      expect(err.message).toMatch(/multi of 12000 operations .* exceeds the server's request limit/);
      expect(err.message).toContain('… 11997 more');
      expect(err.message.length).toBeLessThan(600);
      expect(session.state).toBe('connected');
      expect(await session.exists('/')).not.toBeNull();
    } finally {
      await session.close();
    }
  });
});
