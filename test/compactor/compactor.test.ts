/**
 * The real `compactor <queue>` process against a real cluster whose files are in a real S3 server:
 * steady-state compaction, and every way a compactor can stop (kill -9, SIGSTOP past its session, SIGTERM,
 * its queue deleted) or fail (a corrupt input).
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { TabletMeta } from '../../src/meta/tablet.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { plan } from '../../src/queue/planner.js';
import { deleteQueue } from '../../src/queue/registry.js';
import {
  DataModel,
  queueRows,
  readTablet,
  scanLines,
  useCluster,
  useProcesses,
  useS3,
  useZooKeeper,
  waitFor,
  type TableSetup,
  type LogLine,
  type TableSetupOptions,
  type TestCluster,
} from '../support/index.js';

/** The cluster, one table 't' routed to queue 'q', and the model of what was written to it. */
type Setup = TableSetup & { model: DataModel };

async function setup(
  cluster: TestCluster,
  options: Omit<TableSetupOptions, 'table' | 'queue'> = {},
): Promise<Setup> {
  const s = await cluster.startWithTable({ table: 't', queue: 'q', ...options });
  return { ...s, model: new DataModel() };
}

let clock = 1_000;
/** A batch with explicit, increasing timestamps; some rows are overwritten, some deleted. */
function batch(rows: number, prefix = 'r', deleteEvery = 0): ClientEntry[] {
  const ts = clock++;
  return Array.from({ length: rows }, (_, i) => ({
    row: `${prefix}${String(i % 97).padStart(3, '0')}`,
    cf: 'f',
    cq: `q${i % 3}`,
    ts,
    value: `v${ts}-${i}`,
    delete: deleteEvery > 0 && i % deleteEvery === 0,
  }));
}

async function ingest(s: Setup, entries: ClientEntry[]): Promise<void> {
  s.model.write(entries);
  await s.client.ingest('t', entries);
}

/** No queued work and no reservation: the compactors have caught up. */
async function quiet(s: Setup, timeoutMs = 20_000): Promise<TabletMeta[]> {
  return waitFor(
    async () => {
      if ((await queueRows(s.meta, s.queue.id)).length > 0) return false;
      const tablets = await Promise.all(s.tablets.map((t) => readTablet(s.meta, t.tablet)));
      return tablets.every((t) => t.reservations.size === 0) && tablets;
    },
    'compactions to finish',
    timeoutMs,
  );
}

/** Writes three batches of `rows` into the single tablet: the ratio selects them (one job). */
async function oneJob(s: Setup, rows: number): Promise<void> {
  for (let i = 0; i < 3; i++) await ingest(s, batch(rows));
}

describe('compactor', () => {
  const zk = useZooKeeper();
  const s3 = useS3();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { env: () => s3().env });

  it('end to end - two compactors keep up with many small files; files per tablet fall as the planner says; the scan is exact', async () => {
    const s = await setup(cluster(), { splits: ['r032', 'r064'] });
    const c1 = await cluster().startCompactor('q', { name: 'c1' });
    await cluster().startCompactor('q', { name: 'c2' });
    for (let i = 0; i < 24; i++) await ingest(s, batch(60, 'r', i % 5 === 4 ? 4 : 0));

    const tablets = await quiet(s);
    const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }] });
    for (const t of tablets) {
      const files = [...t.files].map(([name, f]) => ({ name, size: f.size }));
      // The planner has nothing left to do, and far fewer files remain than were written.
      expect(plan({ files, reserved: new Set(), parked: new Set(), config })).toEqual([]);
      expect(files.length).toBeLessThan(8);
    }
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
    // The compactors wrote their outputs to S3, as the metadata records them.
    const store = cluster().store();
    expect(store.url).toBe(s3().storeUrl);
    for (const t of tablets) {
      for (const [name, f] of t.files) expect((await store.stat(name))?.size, name).toBe(f.size);
    }

    // What happened is visible to Prometheus.
    const tserverMetrics = await (await fetch(`http://${s.tserver.server}/metrics`)).text();
    const committed = Number(
      /excompact_tserver_reservations_total\{kind="committed"[^}]*\} (\d+)/.exec(tserverMetrics)?.[1],
    );
    expect(committed).toBeGreaterThan(0);
    const compactorMetrics = await (await fetch(`${c1.status}/metrics`)).text();
    expect(compactorMetrics).toMatch(/excompact_compactor_jobs_total\{outcome="committed"[^}]*\} \d+/);
    // The compactor's own status endpoint (signed) says what it did.
    const own = await cluster()
      .client(c1.status)
      .get<{ state: string; queue: string; outcomes: { committed: number } }>('/v1/status');
    expect(own).toMatchObject({ state: 'serving', queue: 'q' });
    await expect(fetch(`${c1.status}/v1/status`).then((r) => r.status)).resolves.toBe(401);
  });

  it('kill -9 mid-job - its reservation is cancelled, then another compactor does the job; the scan is exact', async () => {
    const s = await setup(cluster());
    const tablet = s.tablets[0]!.tablet;
    // Slow enough that the job is still running when the kill lands, however loaded the machine: the heir
    // starts only after the kill (a process start can take seconds here, and once outlasted the job).
    const slow = await cluster().startCompactor('q', { name: 'slow', args: ['--throughput', '4000'] });
    await oneJob(s, 300);
    const doomed = await slow.waitForLog((l) => l.msg === 'compaction started');
    // The reservation the compactor holds as it dies.
    expect((await readTablet(s.meta, tablet)).reservations.get(doomed.ecid as string)).toMatchObject({
      compactor: slow.compactor,
    });

    slow.kill();
    const heir = await cluster().startCompactor('q', { name: 'heir' });
    const isCancel = (l: LogLine) => l.msg === 'reservation cancelled' && l.ecid === doomed.ecid;
    const cancel = await s.tserver.waitForLog(isCancel, cluster().sessionTimeoutMs + 10_000);
    expect(cancel).toMatchObject({ tablet, reason: 'compactor-gone', compactor: slow.compactor });
    // The heir gets the same job under a new reservation, as a second attempt (the death counts as one).
    const redone = await heir.waitForLog((l) => l.msg === 'compaction started');
    expect(redone).toMatchObject({ tablet, inputs: 3, attempt: 1 });
    expect(redone.ecid).not.toBe(doomed.ecid);
    const committed = await heir.waitForLog((l) => l.msg === 'compaction committed');
    expect(committed.ecid).toBe(redone.ecid);
    // In the tablet server's own order: the dead compactor's reservation was cancelled before the heir's
    // was made.
    const isReserve = (l: LogLine) => l.msg === 'reserved' && l.ecid === redone.ecid;
    await s.tserver.waitForLog(isReserve); // its log comes through a pipe, maybe after the heir's
    expect(s.tserver.lines.findIndex(isCancel)).toBeLessThan(s.tserver.lines.findIndex(isReserve));

    const [t] = await quiet(s);
    expect(t!.files.size).toBe(1);
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
  });

  it('a compactor that makes no progress is detected: its job is cancelled as stalled and done by another', async () => {
    const s = await setup(cluster(), { tserverEnv: { EXC_STALL_TIMEOUT_MS: '1500' } });
    // Alive (its session is fine, it reports on time) but reading 1 byte a second: its figures never move.
    const stuck = await cluster().startCompactor('q', {
      name: 'stuck',
      args: ['--throughput', '1', '--progress-every', '200'],
    });
    await oneJob(s, 50);
    await stuck.waitForLog((l) => l.msg === 'compaction started');
    const heir = await cluster().startCompactor('q', { name: 'heir' });
    await heir.waitForLog((l) => l.msg === 'compaction committed', 20_000);
    await s.tserver.waitForLog((l) => l.msg === 'reservation cancelled' && l.reason === 'stalled', 5_000);
    await stuck.waitForLog(
      (l) => /abandoned|reservation (was|is being) cancelled/.test(String(l.msg)),
      20_000,
    );
    expect(stuck.lines.some((l) => l.msg === 'compaction committed')).toBe(false);
    const [t] = await quiet(s);
    expect(t!.files.size).toBe(1);
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
  });

  it('SIGSTOP past the session timeout, then SIGCONT - it abandons its job, never commits it, and registers again', async () => {
    const s = await setup(cluster());
    const sleeper = await cluster().startCompactor('q', { name: 'sleeper', args: ['--throughput', '5000'] });
    const firstPath = sleeper.compactor;
    await oneJob(s, 300);
    await sleeper.waitForLog((l) => l.msg === 'compaction started');

    sleeper.pause();
    const heir = await cluster().startCompactor('q', { name: 'heir' });
    await heir.waitForLog((l) => l.msg === 'compaction committed', cluster().sessionTimeoutMs + 10_000);
    sleeper.resume();

    const again = await sleeper.waitForLog(
      (l) => l.msg === 'compactor registered' && l.compactor !== firstPath,
      15_000,
    );
    expect(again.compactor).not.toBe(firstPath);
    expect(sleeper.running).toBe(true);
    expect(sleeper.lines.some((l) => l.msg === 'compaction committed')).toBe(false);
    const [t] = await quiet(s);
    expect(t!.files.size).toBe(1);
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
  });

  it('SIGTERM - the node goes at once, the released job is re-reserved by another compactor, exit 0', async () => {
    const s = await setup(cluster());
    const tablet = s.tablets[0]!.tablet;
    const leaving = await cluster().startCompactor('q', { name: 'leaving', args: ['--throughput', '5000'] });
    await oneJob(s, 300);
    const released = await leaving.waitForLog((l) => l.msg === 'compaction started');
    const heir = await cluster().startCompactor('q', { name: 'heir' });
    const session = await cluster().session();

    const stoppedAt = Date.now();
    const exit = leaving.terminate();
    await waitFor(async () => !(await session.exists(leaving.compactor)), 'node to disappear', 5_000, 5);
    const nodeGoneMs = Date.now() - stoppedAt;
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(nodeGoneMs).toBeLessThan(2_000);
    expect(leaving.lines.some((l) => l.msg === 'compaction released')).toBe(true);
    // The tablet server took the job back as released: not a failed attempt.
    const cancel = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === released.ecid,
    );
    expect(cancel).toMatchObject({ reason: 'released', compactor: leaving.compactor });
    // The heir does the same job under a new reservation, still as the first attempt.
    const redone = await heir.waitForLog((l) => l.msg === 'compaction started', 15_000);
    expect(redone).toMatchObject({ tablet, inputs: 3, attempt: 0 });
    expect(redone.ecid).not.toBe(released.ecid);
    await heir.waitForLog((l) => l.msg === 'compaction committed');
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
  });

  it('--concurrency 2 - jobs run on worker threads and commit; the scan is exact; SIGTERM exits 0', async () => {
    const s = await setup(cluster(), { splits: ['r032', 'r064'] });
    const threaded = await cluster().startCompactor('q', { name: 'threaded', args: ['--concurrency', '2'] });
    for (let i = 0; i < 6; i++) await ingest(s, batch(200));
    const started = await threaded.waitForLog((l) => l.msg === 'compaction started', 15_000);
    expect(started).toMatchObject({ thread: true });
    await threaded.waitForLog((l) => l.msg === 'compaction committed', 15_000);
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
    expect(await threaded.terminate()).toEqual({ code: 0, signal: null });
  });

  it('queue deleted - its compactors exit with the queue-deleted code and their reservations are cancelled', async () => {
    const s = await setup(cluster());
    const busy = await cluster().startCompactor('q', { name: 'busy', args: ['--throughput', '5000'] });
    const idle = await cluster().startCompactor('q', { name: 'idle' });
    await oneJob(s, 300);
    await waitFor(
      async () => (await readTablet(s.meta, s.tablets[0]!.tablet)).reservations.size > 0,
      'a reservation',
    );

    await deleteQueue(await cluster().session(), cluster().layout, 'q');
    expect((await busy.waitExit(15_000)).code).toBe(4);
    expect((await idle.waitExit(15_000)).code).toBe(4);
    expect(busy.lines.some((l) => /queue q was deleted/.test(String(l.msg)))).toBe(true);
    const t = await waitFor(async () => {
      const now = await readTablet(s.meta, s.tablets[0]!.tablet);
      return now.reservations.size === 0 && now.queued.size === 0 && now;
    }, 'reservations cancelled');
    expect(t.files.size).toBe(3);
    expect(await scanLines(s.client, 't')).toEqual(s.model.expected());
  });

  it('corrupt input - the job fails with an error naming the file, inputs stay, the job is parked after the attempt limit', async () => {
    const s = await setup(cluster(), { config: { maxAttempts: 2 } });
    await oneJob(s, 50);
    const [before] = await Promise.all(s.tablets.map((t) => readTablet(s.meta, t.tablet)));
    const victim = [...before!.files.keys()][1]!;
    const store = cluster().store();
    const bytes = await store.readRange(victim, 0, (await store.stat(victim))!.size);
    bytes[40] = bytes[40]! ^ 0xff; // inside the first data block
    await store.write(victim, bytes);

    const c = await cluster().startCompactor('q');
    const parked = await waitFor(async () => {
      const t = await readTablet(s.meta, s.tablets[0]!.tablet);
      return [...t.failures.values()].find((f) => f.parked);
    }, 'the job to be parked');
    expect(parked.attempts).toBe(2);
    expect(parked.lastError).toContain(victim);
    expect(parked.lastError).toMatch(/CORRUPT_FILE/);
    const after = await readTablet(s.meta, s.tablets[0]!.tablet);
    expect([...after.files.keys()].sort()).toEqual([...before!.files.keys()].sort());
    expect(after.reservations.size).toBe(0);
    expect(c.running).toBe(true);
    // The compactor logs each failure before reporting it, but its output reaches us through a pipe, maybe
    // after the report: wait for the lines, then count them.
    const failed = () => c.lines.filter((l) => l.msg === 'compaction failed');
    await waitFor(async () => failed().length >= 2, 'both failures in the compactor log', 5_000);
    expect(failed()).toHaveLength(2);
  });
});
