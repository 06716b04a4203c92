/**
 * Garbage collection with real processes: replaced inputs, abandoned outputs and crash leftovers (even
 * half-written temporary files) are collected after the grace period; referenced files never are; a scan that still reads a replaced file
 * finishes.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { ulid as makeUlid } from 'ulid';
import { DEL_PREFIX } from '../../src/meta/keys.js';
import { DONE_PREFIX, doneRow } from '../../src/meta/outcomes.js';
import { parseTablet } from '../../src/meta/tablet.js';
import { createQueue } from '../../src/queue/registry.js';
import { LocalObjectStore, scanFiles, writeRFile } from '../../src/storage/index.js';
import { TestCompactor, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const GRACE_MS = 1_500;

describe('garbage collection', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { env: { EXC_GC_GRACE_MS: String(GRACE_MS) } });

  it('collects replaced inputs, cancelled outputs and crash leftovers after the grace period, and nothing referenced', async () => {
    await cluster().startManager();
    await cluster().startTserver();
    const queue = await createQueue(await cluster().session(), cluster().layout, 'q');
    const meta = await cluster().meta();
    const table = await meta.call<{ id: string }>('POST', '/v1/tables', {
      name: 't',
      config: { queues: [{ queue: queue.name }] },
    });
    const client = new ExcClient({ meta, secret: cluster().secret, logger: silentLogger() });
    const store = new LocalObjectStore(cluster().storePath);
    const rows = (prefix: string) =>
      Array.from({ length: 20 }, (_, i) => ({ row: `${prefix}${i}`, value: 'v' }));
    for (const p of ['a', 'b', 'c']) await client.ingest('t', rows(p));
    const tablet = (await client.tablets('t'))[0]!.tablet;

    // A cancelled reservation leaves an output behind; a crash leaves a file nothing knows about.
    const quitter = await TestCompactor.start(cluster(), 'q');
    // The tablet server learns of the new queue through a watch: its work is queued once it has.
    await waitFor(
      async () => (await quitter.entries()).some((e) => e.tablet === tablet),
      "the tablet's work in queue q",
    );
    const abandoned = (await quitter.reserve(tablet))!;
    await quitter.compact(abandoned);
    await quitter.close();
    const leftover = `tables/${table.id}/Ileftover.rf`;
    // A write that crashed half way leaves a hidden temporary file (the local store's atomic writes).
    const tempFile = join(cluster().storePath, 'tables', table.id, '.Icrashed.rf.0123456789ab.tmp');
    mkdirSync(dirname(tempFile), { recursive: true });
    writeFileSync(tempFile, 'half a file');
    await writeRFile(store, leftover, [
      {
        key: {
          row: Buffer.from('zz'),
          family: Buffer.alloc(0),
          qualifier: Buffer.alloc(0),
          timestamp: 1,
          deleted: false,
        },
        value: Buffer.from('x'),
      },
    ]);

    // A committed compaction replaces the three inputs.
    const worker = await TestCompactor.start(cluster(), 'q');
    const entry = await (async () => {
      for (let i = 0; i < 100; i++) {
        const [e] = await worker.entries();
        if (e) return e;
        await new Promise((r) => setTimeout(r, 30));
      }
      throw new Error('no requeue');
    })();
    const job = (await worker.reserve(entry.tablet))!;
    const inputs = job.inputs.map((i) => i.name);
    // A scan opened on the old files before the commit.
    const oldScan = scanFiles({
      store,
      files: inputs,
      settings: { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: true },
    })[Symbol.asyncIterator]();
    expect((await oldScan.next()).done).toBe(false);
    await worker.commit(job, await worker.compact(job));
    await worker.close();

    // Inside the grace period nothing is deleted, and the old scan reads on.
    await meta.call('POST', '/v1/gc/run');
    for (const f of [...inputs, abandoned.output, leftover]) expect(await store.stat(f), f).not.toBeNull();
    expect(existsSync(tempFile)).toBe(true);
    let read = 1;
    while (!(await oldScan.next()).done) read++;
    expect(read).toBe(60);

    // After it, every unreferenced file goes, and only those.
    await new Promise((r) => setTimeout(r, GRACE_MS + 200));
    await meta.call('POST', '/v1/gc/run');
    for (const f of [...inputs, abandoned.output, leftover]) expect(await store.stat(f), f).toBeNull();
    expect(existsSync(tempFile)).toBe(false);
    const tabletNow = parseTablet(tablet, await meta.row(tablet));
    expect([...tabletNow.files.keys()]).toEqual([job.output]);
    expect(await store.stat(job.output)).not.toBeNull();
    const dels = [];
    for await (const c of meta.scanAll({ prefix: DEL_PREFIX })) dels.push(c.row);
    expect(dels).toEqual([]);
    const remaining = [];
    for await (const o of store.list('tables/')) remaining.push(o.name);
    expect(remaining).toEqual([job.output]);
    const scanned = [];
    for await (const e of client.scan('t')) scanned.push(e.row.toString());
    expect(scanned).toHaveLength(60);
    await store.close();
  });
});

describe('garbage collection - compaction outcomes', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, { env: { EXC_OUTCOME_RETENTION_MS: '60000' } });

  it('trims outcome rows older than the retention, and only those', async () => {
    await cluster().startManager();
    const meta = await cluster().meta();
    const old = makeUlid(Date.now() - 120_000);
    const recent = makeUlid(Date.now() - 1_000);
    await meta.mutate(
      [old, recent].map((ecid) => ({ puts: [{ row: doneRow(ecid), col: 'outcome', value: '{}' }] })),
    );
    await meta.call('POST', '/v1/gc/run');
    const rows = [];
    for await (const c of meta.scanAll({ prefix: DONE_PREFIX })) rows.push(c.row);
    expect(rows).toEqual([doneRow(recent)]);
  });
});

describe('garbage collection - the outcome row limit', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, {
    env: { EXC_OUTCOME_MAX_ROWS: '1000', EXC_GC_INTERVAL_MS: '200', EXC_GC_SWEEP_INTERVAL_MS: '3600000' },
  });

  it('trims the oldest rows beyond the limit at a sweep, and does not count the rows every cycle', async () => {
    await cluster().startManager();
    const meta = await cluster().meta();
    const cycles = async () =>
      (await meta.call<{ gc: { cycles: number } | null }>('GET', '/v1/status')).gc?.cycles ?? 0;
    // The first cycle after the manager starts is a sweep: past it, the next sweep is an hour away.
    await expect.poll(cycles, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
    const base = Date.now() - 60_000;
    const ecids = Array.from({ length: 1_005 }, (_, i) => makeUlid(base + i));
    await meta.mutate(ecids.map((ecid) => ({ puts: [{ row: doneRow(ecid), col: 'outcome', value: '{}' }] })));
    const rows = async (): Promise<string[]> => {
      const out = [];
      for await (const c of meta.scanAll({ prefix: DONE_PREFIX })) out.push(c.row);
      return out;
    };
    const before = await cycles();
    await expect.poll(cycles, { timeout: 20_000 }).toBeGreaterThanOrEqual(before + 2);
    expect(await rows()).toHaveLength(1_005);

    await meta.call('POST', '/v1/gc/run');
    expect(await rows()).toEqual(ecids.slice(5).map(doneRow));
  });
});
