/**
 * A reserve whose answer is lost because its tablet server died right after writing the reservation
 * (DESIGN.md, "The life of a compaction", step 3), with real processes: the compactor reaches the first
 * tablet server through a proxy that forwards its reserve, lets the server write the reservation, kills
 * the server with SIGKILL and cuts the answer. The compactor repeats the reserve under its request id on
 * the tablet's new host, which loaded the reservation and answers with it: the job runs and commits
 * there under the reservation the dead server wrote, and the compactor is never fenced for holding a
 * reservation it did not know of.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { readTablet, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

function batch(ts: number): ClientEntry[] {
  return Array.from({ length: 200 }, (_, i) => ({
    row: `r${String(i).padStart(4, '0')}`,
    ts,
    value: `v${ts}-${i}`,
  }));
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('reserve follows its tablet', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: 3_000 });

  it('host killed between writing a reservation and answering - the heir answers the repeated reserve, the job commits there', async () => {
    const c = cluster();
    const port = await freePort();
    const proxy = await FaultProxy.start(port);
    try {
      // The first tablet server listens on `port` and is reached (by everyone) through the proxy.
      const s = await c.startWithTable({
        queue: 'q',
        tserverEnv: { EXC_PORT: String(port), EXC_ADVERTISE_PORT: String(proxy.port) },
      });
      const tablet = s.tablets[0]!.tablet;
      const heir = await c.startTserver({ name: 'heir' });
      for (const ts of [1, 2, 3]) await s.client.ingest(s.table, batch(ts));

      let killed = false;
      proxy.inject(
        {
          kind: 'lose-answer',
          then: () => {
            s.tserver.kill();
            killed = true;
          },
        },
        { urlIncludes: '/v1/reserve' },
      );
      const compactor = await c.startCompactor('q');
      await waitFor(async () => killed, 'the first server to answer a reserve (and be killed)');
      // The dead server wrote the reservation before its answer was lost.
      const written = await readTablet(s.meta, tablet);
      expect(written.reservations.size).toBe(1);
      const [ecid, reservation] = [...written.reservations][0]!;
      expect(reservation.compactor).toBe(compactor.compactor);

      const loaded = await heir.waitForLog((l) => l.msg === 'tablet loaded' && l.tablet === tablet, 30_000);
      expect(loaded.reservations).toBe(1);
      // The compactor runs the very reservation the dead server wrote, and commits it at the heir.
      await compactor.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === ecid, 30_000);
      await heir.waitForLog((l) => l.msg === 'committed' && l.ecid === ecid);
      expect(heir.lines.some((l) => /fencing it/.test(String(l.msg)))).toBe(false);
      expect(compactor.lines.some((l) => /registration lost/.test(String(l.msg)))).toBe(false);
      const after = await waitFor(async () => {
        const t = await readTablet(s.meta, tablet);
        return t.reservations.size === 0 && t;
      }, 'the reservation to end');
      expect([...after.files.keys()].some((f) => reservation.inputs.includes(f))).toBe(false);
    } finally {
      await proxy.stop();
    }
  });
});
