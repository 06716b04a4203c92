/**
 * A compactor's registration and its sessions, with the compactor in the test's own process (so a test can
 * cut its ZooKeeper connection at a chosen step) against a real ZooKeeper, manager and tablet server.
 */
import { once } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Registration } from '../../src/compactor/registration.js';
import type { ReservedJob } from '../../src/queue/protocol.js';
import type { PeerClients } from '../../src/rpc/peers.js';
import { inProcessCompactor } from '../support/in-process.js';
import {
  queueRows,
  readTablet,
  startProxy,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
} from '../support/index.js';

/** Three equal files in the table's only tablet: one job for the queue. */
async function oneJob(s: TableSetup): Promise<void> {
  for (let b = 0; b < 3; b++) {
    await s.client.ingest(
      s.table,
      Array.from({ length: 20 }, (_, i) => ({ row: `r${i}`, cf: 'f', cq: 'q', ts: b + 1, value: `v${b}` })),
    );
  }
}

/** Waits until the tablet has one file and no reservation, and nothing is queued: the job committed. */
async function committed(s: TableSetup, timeoutMs = 20_000): Promise<void> {
  await waitFor(
    async () => {
      const t = await readTablet(s.meta, s.tablets[0]!.tablet);
      return (
        t.files.size === 1 && t.reservations.size === 0 && (await queueRows(s.meta, s.queue.id)).length === 0
      );
    },
    'the job to be committed',
    timeoutMs,
  );
}

describe('compactor registration', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);
  afterEach(() => vi.restoreAllMocks());

  it('rejoin - a session lost while registering again starts one registration, not two, and its jobs commit', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', queue: 'q' });
    const proxy = await startProxy(zk().port);
    const compactor = inProcessCompactor(c, 'q', { zk: proxy.address });
    try {
      // The first rejoin loses its connection as it starts watching its nodes, and the session expires
      // before the connection comes back: the session is lost while watch() waits.
      const watch = Registration.prototype.watch; // eslint-disable-line @typescript-eslint/unbound-method -- called with its own `this` below
      let calls = 0;
      vi.spyOn(Registration.prototype, 'watch').mockImplementation(async function (this: Registration) {
        if (++calls !== 2) return watch.call(this);
        proxy.blackhole();
        await once(this.session, 'suspended');
        const restored = once(this.session, 'lost').then(() => proxy.restore());
        try {
          return await watch.call(this);
        } finally {
          await restored;
        }
      });
      await compactor.server.start();
      const first = compactor.server.path!;
      const admin = await c.session();
      await admin.delete(first); // its node deleted: it registers again
      await compactor.waitForLog((l) => l.msg === 'zookeeper session lost', 20_000);
      await compactor.waitForLog(
        (l) => l.msg === 'compactor state' && l.to === 'serving' && l.from === 'rejoining',
        20_000,
      );
      expect(calls).toBeGreaterThanOrEqual(3);

      // One registration: one node under the queue, and it is the compactor's. (The lost session's node goes
      // when the server expires it.)
      const queueNode = c.layout.queueNode(s.queue.id);
      const nodes = await waitFor(
        async () => {
          const children = await admin.children(queueNode);
          return children.length === 1 && children;
        },
        'one compactor node under the queue',
        10_000,
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${(await admin.children(queueNode)).join(', ')}`);
      });
      expect(`${queueNode}/${nodes[0]}`).toBe(compactor.server.path);
      await oneJob(s);
      await committed(s);
      await new Promise((r) => setTimeout(r, 2 * c.sessionTimeoutMs));
      expect(await admin.children(queueNode)).toEqual(nodes);
    } finally {
      await compactor.close();
      await proxy.stop();
    }
  });
  it('reserve answered after the session was lost - the job is given back at once, not run under the lost node', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', queue: 'q' });
    const compactor = inProcessCompactor(c, 'q');
    try {
      await compactor.server.start();
      const first = compactor.server.path!;
      const admin = await c.session();
      // The first reservation's answer arrives after the compactor's node was deleted and it saw the loss.
      const peers = (compactor.server as unknown as { peers: PeerClients }).peers;
      const get = peers.get.bind(peers);
      let late: ReservedJob | undefined;
      vi.spyOn(peers, 'get').mockImplementation((address) => {
        const client = get(address);
        const post = client.post.bind(client);
        return Object.assign(Object.create(client) as typeof client, {
          post: async (path: string, ...rest: unknown[]) => {
            const answer = await (post as (p: string, ...r: unknown[]) => Promise<unknown>)(path, ...rest);
            const job = (answer as { job?: ReservedJob | null }).job;
            if (path === '/v1/reserve' && job && !late) {
              late = job;
              await admin.delete(first);
              await waitFor(
                async () => compactor.server.path !== first,
                'the compactor to see its node gone',
              );
            }
            return answer;
          },
        });
      });
      await oneJob(s);
      await committed(s);
      expect(late).toBeDefined();
      // Never run: no merge started for it, and it is counted as released.
      const started = compactor.lines.filter((l) => l.msg === 'compaction started').map((l) => l.ecid);
      expect(started).not.toContain(late!.ecid);
      expect(compactor.lines.some((l) => l.msg === 'compaction abandoned' && l.ecid === late!.ecid)).toBe(
        false,
      );
      await compactor.waitForLog(
        (l) => l.msg === 'reserved after the registration was lost: released' && l.ecid === late!.ecid,
        5_000,
      );
      // Done by the compactor's next registration.
      const done = await compactor.waitForLog((l) => l.msg === 'compaction committed');
      expect(done.ecid).not.toBe(late!.ecid);
    } finally {
      await compactor.close();
    }
  });
});
