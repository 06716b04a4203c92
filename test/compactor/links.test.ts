/**
 * Sub-second reclaim: a compactor keeps a link open to the tablet server it works for; when the compactor
 * dies the kernel closes it, and the tablet server fences the compactor (deletes its node) after a short
 * grace, long before its ZooKeeper session (6 s here) expires. A compactor that dies with no link to the
 * server that has its tablet now (its old host died first) is found by that server asking its address.
 * A paused compactor keeps its link: it is not dead, and nothing happens before its session timeout.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { doneRow, parseOutcome } from '../../src/meta/outcomes.js';
import {
  readTablet,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
} from '../support/index.js';

const SESSION_MS = 6_000;

let clock = 1_000;
function batch(rows: number): ClientEntry[] {
  const ts = clock++;
  return Array.from({ length: rows }, (_, i) => ({
    row: `r${String(i).padStart(4, '0')}`,
    ts,
    value: `v${ts}`,
  }));
}

/** Three batches into the single tablet: the ratio selects them as one job. */
async function oneJob(s: TableSetup, rows: number): Promise<void> {
  for (let i = 0; i < 3; i++) await s.client.ingest('TABLE1', batch(rows));
}

describe('compactor links', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { sessionTimeoutMs: SESSION_MS });

  async function slowJob(env: Record<string, string> = {}) {
    const s = await cluster().startWithTable({ queue: 'q', tserverEnv: env });
    const slow = await cluster().startCompactor('q', { name: 'slow', args: ['--throughput', '20000'] });
    await oneJob(s, 300);
    const started = await slow.waitForLog((l) => l.msg === 'compaction started');
    return { s, slow, ecid: started.ecid as string };
  }

  it('kill -9 - the link closes and the tablet server fences the compactor: its work is back in well under the session timeout', async () => {
    const { s, slow, ecid } = await slowJob();
    const killedAt = Date.now();
    slow.kill();
    const cancel = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === ecid,
      SESSION_MS + 5_000,
    );
    const reclaimMs = Date.now() - killedAt;
    expect(cancel).toMatchObject({ reason: 'compactor-gone', compactor: slow.compactor });
    expect(
      s.tserver.lines.some((l) => /fencing it/.test(l.msg ?? '') && l.compactor === slow.compactor),
    ).toBe(true);
    // A generous bound for a loaded machine: the design's figure is a few hundred milliseconds.
    expect(reclaimMs).toBeLessThan(SESSION_MS / 3);
    const outcome = parseOutcome((await s.meta.row(doneRow(ecid))).get('outcome') ?? '');
    expect(outcome).toMatchObject({ outcome: 'cancelled', reason: 'compactor-gone' });
  });

  it('kill -9 after its tablet server died - the new host of its tablet finds nothing at its address and fences it, long before its session expires', async () => {
    // The compactor's session is long: without the new host asking, its work would wait for it.
    const compactorSessionMs = 25_000;
    const s = await cluster().startWithTable({ queue: 'q' });
    const heir = await cluster().startTserver({ name: 'heir' });
    const slow = await cluster().startCompactor('q', {
      name: 'slow',
      args: ['--throughput', '20000'],
      env: { EXC_ZK_SESSION_TIMEOUT_MS: String(compactorSessionMs) },
    });
    await oneJob(s, 300);
    const ecid = (await slow.waitForLog((l) => l.msg === 'compaction started')).ecid as string;
    // The host dies first, then the compactor: its link to the dead host was gone already, and it never
    // linked to the heir, so no closing connection tells anyone.
    s.tserver.kill();
    await new Promise((r) => setTimeout(r, 300));
    const killedAt = Date.now();
    slow.kill();
    const loaded = await heir.waitForLog((l) => l.msg === 'tablet loaded', 3 * SESSION_MS);
    expect(loaded.reservations).toBe(1);
    const cancel = await heir.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === ecid,
      compactorSessionMs + 10_000,
    );
    const reclaimMs = Date.now() - killedAt;
    expect(cancel).toMatchObject({ reason: 'compactor-gone', compactor: slow.compactor });
    const fenced = heir.lines.find((l) => /fencing it/.test(l.msg ?? '') && l.compactor === slow.compactor);
    expect(fenced?.why).toMatch(/nothing listens at its address/);
    // The host's own session (6 s) has to end before the heir has the tablet at all; a generous bound
    // for a loaded machine, well short of the compactor's session.
    expect(reclaimMs).toBeLessThan(compactorSessionMs / 2);
  });

  it('paused within its session - the link stays open, nothing is cancelled, and the job commits', async () => {
    const { s, slow, ecid } = await slowJob();
    slow.pause();
    await new Promise((r) => setTimeout(r, SESSION_MS / 2));
    expect((await readTablet(s.meta, s.tablets[0]!.tablet)).reservations.has(ecid)).toBe(true);
    slow.resume();
    await slow.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === ecid, 30_000);
    expect(s.tserver.lines.some((l) => l.msg === 'reservation cancelled')).toBe(false);
  });

  it('grace 0 - without fencing by link, a killed compactor is noticed only when its session expires', async () => {
    const { s, slow, ecid } = await slowJob({ EXC_COMPACTOR_LINK_GRACE_MS: '0' });
    const killedAt = Date.now();
    slow.kill();
    await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === ecid,
      SESSION_MS + 10_000,
    );
    expect(Date.now() - killedAt).toBeGreaterThan(SESSION_MS / 2);
    await waitFor(
      async () => !(await readTablet(s.meta, s.tablets[0]!.tablet)).reservations.has(ecid),
      'gone',
    );
  });
});
