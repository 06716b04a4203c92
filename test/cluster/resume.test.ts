/**
 * Resume, don't redo (issue 17; DESIGN.md, "Resume"), with real processes: a compactor slowed by
 * `--throughput` checkpoints its output while it runs and is killed with SIGKILL in the middle; the tablet
 * server cancels its reservation (compactor-gone) and keeps the last checkpoint with the requeued job; the
 * next compactor goes on from it, writes only the rest, and commits the very file an uninterrupted
 * compaction writes. The collector then removes the parts that nothing names, and the check agrees.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { RunningCompaction } from '../../src/meta/views.js';
import { compactFiles, isPartName, type ObjectStore } from '../../src/storage/index.js';
import { readTablet, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const CHECKPOINTS = { EXC_CHECKPOINT_BYTES: String(16 * 1024), EXC_CHECKPOINT_MS: '500' };
// Input files well beyond the store's read chunk (256 KiB), so that a throttled merge advances steadily
// rather than in one burst at the end.
const ROWS = 20_000;

function batch(ts: number): ClientEntry[] {
  return Array.from({ length: ROWS }, (_, i) => ({
    row: `r${String(i).padStart(6, '0')}`,
    ts,
    value: `value-${ts}-${'x'.repeat(40)}-${i}`,
  }));
}

async function bytesOf(store: ObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}

async function partsIn(store: ObjectStore): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.list('tables/')) if (isPartName(o.name)) out.push(o.name);
  return out;
}

describe('resume', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, {
    sessionTimeoutMs: 6_000,
    // The collector runs only when asked (gc/run below), with a short grace so that leftovers go at once.
    env: { EXC_GC_GRACE_MS: '1000', EXC_GC_SWEEP_INTERVAL_MS: '0' },
  });

  it('kill -9 mid-job - the next compactor resumes from the checkpoint, writes only the rest, commits the same bytes', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', tserverEnv: CHECKPOINTS, config: { versions: 1 } });
    const tablet = s.tablets[0]!.tablet;
    // Everything ingested first: the job is all of the tablet's files, and still is when it is resumed (a
    // job whose inputs stopped being all the files starts over, its settings would drop delete markers).
    for (const ts of [1, 2, 3]) await s.client.ingest(s.table, batch(ts));
    const slow = await c.startCompactor('q', {
      name: 'slow',
      args: ['--throughput', '300000'],
      env: CHECKPOINTS,
    });
    const started = await slow.waitForLog((l) => l.msg === 'compaction started', 30_000);
    const ecid = started.ecid as string;

    // Killed once a good part of the output is checkpointed in the metadata store.
    const recorded = await s.tserver.waitForLog(
      (l) => l.msg === 'checkpoint recorded' && l.ecid === ecid && (l.bytes as number) >= 400_000,
      45_000,
    );
    expect(slow.lines.some((l) => l.msg === 'compaction committed')).toBe(false);
    // Operators see how much of a running job is safe (`admin compactions list --json`).
    const { running } = await s.meta.call<{ running: RunningCompaction[] }>('GET', '/v1/compactions');
    expect(running.find((r) => r.ecid === ecid)?.checkpointBytes).toBeGreaterThanOrEqual(
      recorded.bytes as number,
    );
    slow.kill();
    const cancel = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === ecid,
      15_000,
    );
    expect(cancel).toMatchObject({ reason: 'compactor-gone', keptCheckpoint: true });

    // The requeued job keeps the checkpoint: the same inputs, the settings they were reserved with.
    const after = await readTablet(s.meta, tablet);
    expect(after.reservations.size).toBe(0);
    expect(after.resumes.size).toBe(1);
    const kept = [...after.resumes.values()][0]!;
    expect(kept.fromEcid).toBe(ecid);
    expect(kept.checkpoint.bytes).toBeGreaterThanOrEqual(recorded.bytes as number);
    const store = c.store();
    // The local store appends in place: one file per attempt, durable at least up to the checkpoint (the
    // killed compactor may have appended more since).
    for (const p of kept.checkpoint.parts) {
      expect(p.name).toMatch(/\.partial$/);
      expect((await store.stat(p.name))?.size).toBeGreaterThanOrEqual(p.size);
    }

    const next = await c.startCompactor('q', { name: 'next', env: CHECKPOINTS });
    const resumed = await next.waitForLog((l) => l.msg === 'compaction resumed from a checkpoint', 30_000);
    expect(resumed.resumedBytes).toBe(kept.checkpoint.bytes);
    const reserved = await s.tserver.waitForLog((l) => l.msg === 'reserved' && l.ecid === resumed.ecid);
    expect(reserved).toMatchObject({ resumedFrom: ecid, checkpointBytes: kept.checkpoint.bytes });
    const committed = await next.waitForLog(
      (l) => l.msg === 'compaction committed' && l.ecid === resumed.ecid,
      60_000,
    );
    // Only the remainder was written by the resuming attempt.
    const size = committed.size as number;
    expect(committed.resumedBytes).toBe(kept.checkpoint.bytes);
    expect(committed.bytesWritten).toBe(size - kept.checkpoint.bytes);
    expect(committed.bytesWritten as number).toBeLessThan(size);

    const metrics = await (await fetch(`${next.status}/metrics`)).text();
    expect(metrics).toMatch(/^excompact_compactions_resumed_total\{queue="q"[^}]*\} 1$/m);

    // The tablet now holds one file: byte for byte what an uninterrupted compaction of the same inputs,
    // with the same settings and codec, writes.
    // (20,000 rows make more files than a job takes: the files it did not take stay.)
    const final = await waitFor(async () => {
      const t = await readTablet(s.meta, tablet);
      return t.reservations.size === 0 && kept.inputs.every((f) => !t.files.has(f)) && t;
    }, 'the resumed job to be committed');
    expect(final.resumes.size).toBe(0);
    const [file, ...more] = [...final.files.keys()].filter((f) => !after.files.has(f));
    expect(more).toEqual([]);
    const expected = await compactFiles({
      store,
      inputs: kept.inputs,
      output: 'tables/check/Cexpected.rf',
      settings: kept.settings,
      ...(kept.compression ? { compression: kept.compression } : {}),
    });
    expect(expected.output?.size).toBe(size);
    expect((await bytesOf(store, file!)).equals(await bytesOf(store, 'tables/check/Cexpected.rf'))).toBe(
      true,
    );
    await store.delete('tables/check/Cexpected.rf');

    // And a scan sees exactly the newest version of every row.
    const scanned: string[] = [];
    for await (const e of s.client.scan(s.table)) scanned.push(`${e.row.toString()}=${e.value.toString()}`);
    expect(scanned).toEqual(batch(3).map((e) => `${String(e.row)}=${String(e.value)}`));

    // The resuming compactor deleted the parts it composed; the killed one's last part, written after the
    // checkpoint that was kept, is a leftover nothing names: the collector's sweep removes it.
    for (const p of kept.checkpoint.parts) expect(await store.stat(p.name)).toBeNull();
    await new Promise((r) => setTimeout(r, 1_200));
    await s.meta.call('POST', '/v1/gc/run', {});
    expect(await partsIn(store)).toEqual([]);
    const check = await c.cli(['admin', 'check', '--json']);
    const report = JSON.parse(check.stdout) as { problems: Record<string, { count: number }> };
    expect(report.problems.orphanFiles?.count ?? 0).toBe(0);
    expect(report.problems.missingFiles?.count ?? 0).toBe(0);
  }, 150_000);
});
