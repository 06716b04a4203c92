/**
 * Split jobs (issue 17; DESIGN.md, "Split jobs"), with real processes: a table whose jobs above 256 KiB
 * are split into up to 4 sub-jobs by row range. Three compactors take sub-jobs of one job; the slow one
 * is killed with SIGKILL in the middle of its sub-job, which is planned again and run by another; the
 * last commit installs every sub-job's output at once. The tablet then holds one file per non-empty range,
 * the ranges do not overlap, a scan sees exactly what was written, and the collector and the check agree
 * that nothing is left over. A large user compaction is split the same way: cancelled while a sub-job
 * runs, it installs nothing; requested again, its filter applies once its last sub-job commits.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import type { UserCompactionStatus } from '../../src/meta/user-compactions.js';
import type { RunningCompaction } from '../../src/meta/views.js';
import { compareBytes, RFileReader } from '../../src/storage/index.js';
import { cliJson, cliOk } from '../support/cli.js';
import { readTablet, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const ROWS = 20_000;

function batch(ts: number): ClientEntry[] {
  return Array.from({ length: ROWS }, (_, i) => ({
    row: `r${String(i).padStart(6, '0')}`,
    ts,
    value: `value-${ts}-${'x'.repeat(40)}-${i}`,
  }));
}

describe('split jobs', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs, {
    sessionTimeoutMs: 6_000,
    env: { EXC_GC_GRACE_MS: '1000', EXC_GC_SWEEP_INTERVAL_MS: '0' },
  });

  it('a large job runs as sub-jobs on several compactors; one killed mid-sub-job is redone; one commit installs them all', async () => {
    const c = cluster();
    const s = await c.startWithTable({
      queue: 'q',
      config: { versions: 1, splitAbove: 256 * 1024, maxSplits: 4 },
    });
    const tablet = s.tablets[0]!.tablet;
    for (const ts of [1, 2, 3]) await s.client.ingest(s.table, batch(ts));
    const before = await readTablet(s.meta, tablet);

    // The slow compactor takes the first sub-job and is killed while it runs it.
    const slow = await c.startCompactor('q', { name: 'slow', args: ['--throughput', '150000'] });
    const started = await slow.waitForLog((l) => l.msg === 'compaction started', 30_000);
    const first = await s.tserver.waitForLog((l) => l.msg === 'reserved' && l.ecid === started.ecid);
    expect(first).toMatchObject({ subJob: '1/4' });
    const splitId = first.split as string;
    const range = started.range as { start?: string; end?: string };
    expect(range.start).toBeUndefined();
    expect(range.end).toMatch(/^[0-9a-f]+$/);

    const others = [
      await c.startCompactor('q', { name: 'a', args: ['--throughput', '1500000'] }),
      await c.startCompactor('q', { name: 'b', args: ['--throughput', '1500000'] }),
    ];
    await others[0]!.waitForLog((l) => l.msg === 'compaction started', 30_000);
    // Operators see the sub-job as such, with its share of the inputs as the progress bar's 100%.
    const listed = await c.cli(['admin', 'compactions', 'list', '--state', 'running', '--json']);
    const running = (JSON.parse(listed.stdout) as { running: RunningCompaction[] }).running;
    const mine = running.find((r) => r.ecid === started.ecid)!;
    expect(mine.split).toEqual({ id: splitId, index: 0, of: 4 });
    const now = await readTablet(s.meta, tablet);
    const jobInputs = now.reservations.get(started.ecid as string)!.inputs;
    expect(mine.inputBytes).toBe(Math.round(jobInputs.reduce((n, f) => n + now.files.get(f)!.size, 0) / 4));
    slow.kill();
    const cancel = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === started.ecid,
      15_000,
    );
    expect(cancel).toMatchObject({ reason: 'compactor-gone' });

    // Every sub-job commits, the killed one's on another compactor; the split is gone with the inputs.
    const final = await waitFor(
      async () => {
        const t = await readTablet(s.meta, tablet);
        return (
          t.splits.size === 0 && t.reservations.size === 0 && jobInputs.every((f) => !t.files.has(f)) && t
        );
      },
      'the split job to be committed',
      90_000,
    );
    const reserved = s.tserver.lines.filter((l) => l.msg === 'reserved' && l.split === splitId);
    // Four sub-jobs, one of them twice; taken by more than one compactor.
    expect(reserved.map((l) => l.subJob).sort()).toEqual(['1/4', '1/4', '2/4', '3/4', '4/4']);
    expect(new Set(reserved.map((l) => l.compactor)).size).toBeGreaterThanOrEqual(3);
    const redo = reserved.filter((l) => l.subJob === '1/4')[1]!;
    expect(redo.compactor).not.toBe(first.compactor);

    // One file per range, in row order without overlap; the files the job did not take are still there.
    const store = c.store();
    const files = [...final.files.keys()];
    const outputs = files.filter((f) => !before.files.has(f));
    expect(outputs.length).toBe(4);
    expect(files.filter((f) => before.files.has(f)).sort()).toEqual(
      [...before.files.keys()].filter((f) => !jobInputs.includes(f)).sort(),
    );
    // Weighed as one file, the four equal outputs are not compacted again among themselves.
    expect(new Set(outputs.map((f) => final.files.get(f)!.group))).toEqual(new Set([splitId]));
    const summaries = await Promise.all(outputs.map(async (f) => (await RFileReader.open(store, f)).summary));
    summaries.sort((a, b) => compareBytes(a.firstKey!.row, b.firstKey!.row));
    for (let i = 1; i < summaries.length; i++)
      expect(compareBytes(summaries[i - 1]!.lastKey!.row, summaries[i]!.firstKey!.row)).toBeLessThan(0);
    expect(summaries.reduce((n, f) => n + f.entries, 0)).toBeLessThanOrEqual(ROWS);
    const scanned: string[] = [];
    for await (const e of s.client.scan(s.table)) scanned.push(`${e.row.toString()}=${e.value.toString()}`);
    expect(scanned).toEqual(batch(3).map((e) => `${String(e.row)}=${String(e.value)}`));

    // Five reservations, each ended once: the killed one cancelled, the four others committed.
    const committed = s.tserver.lines.filter((l) => l.msg === 'committed').map((l) => l.ecid);
    const ecids = reserved.map((l) => l.ecid);
    expect(ecids.filter((e) => committed.includes(e))).toHaveLength(4);
    expect(committed.filter((e) => e === started.ecid)).toEqual([]);

    // The killed sub-job's output (if it got that far) and the inputs are collected; the check is clean.
    await new Promise((r) => setTimeout(r, 1_200));
    await s.meta.call('POST', '/v1/gc/run', {});
    const present: string[] = [];
    for await (const o of store.list('tables/')) present.push(o.name);
    expect(present.sort()).toEqual(files.sort());
    const check = await c.cli(['admin', 'check', '--json']);
    const report = JSON.parse(check.stdout) as { problems: Record<string, { count: number }> };
    for (const [name, p] of Object.entries(report.problems)) expect(p.count, name).toBe(0);
  }, 150_000);

  it('a large user compaction is split too: cancelled mid-way it installs nothing; run again, its filter applies at the last commit', async () => {
    const c = cluster();
    const s = await c.startWithTable({
      queue: 'q',
      config: { versions: 1, splitAbove: 256 * 1024, maxSplits: 4 },
    });
    const tablet = s.tablets[0]!.tablet;
    for (const ts of [1, 2, 3]) await s.client.ingest(s.table, batch(ts));
    const before = await readTablet(s.meta, tablet);
    const scan = async () => {
      const out: string[] = [];
      for await (const e of s.client.scan(s.table)) out.push(`${e.row.toString()}=${e.value.toString()}`);
      return out;
    };
    const all = batch(3).map((e) => `${String(e.row)}=${String(e.value)}`);
    // Drops rows r000000–r000999.
    const filter = `dropRowPrefix:${JSON.stringify({ prefixes: ['r000'] })}`;
    const compact = async () =>
      (await cliJson<{ id: string }>(c, ['admin', 'table', 'compact', s.table, '--filter', filter, '--json']))
        .id;

    // The first request's job is split; a slow compactor runs its first sub-job, a fast one commits
    // another; then the request is cancelled. The running sub-jobs are cancelled, the split dropped with
    // the outputs of those done, and the filter never applied.
    const first = await compact();
    const slow = await c.startCompactor('q', { name: 'slow', args: ['--throughput', '50000'] });
    const started = await slow.waitForLog((l) => l.msg === 'compaction started', 30_000);
    const reserved = await s.tserver.waitForLog((l) => l.msg === 'reserved' && l.ecid === started.ecid);
    expect(reserved).toMatchObject({ kind: 'user', subJob: '1/4' });
    const splitId = reserved.split as string;
    await c.startCompactor('q', { name: 'a', args: ['--throughput', '1500000'] });
    const partly = await waitFor(async () => {
      const t = await readTablet(s.meta, tablet);
      return t.splits.get(splitId)?.done.some((d) => d?.output) && t;
    }, 'a sub-job of the user split to commit');
    expect([...partly.files.keys()].sort()).toEqual([...before.files.keys()].sort());
    // Running, its status shows the split whole: the sub-jobs that hold or committed it, what they read.
    const running = await cliJson<UserCompactionStatus>(c, [
      'admin',
      'compactions',
      'status',
      first,
      '--json',
    ]);
    expect(running.tablets[0]).toMatchObject({ state: 'running', split: { id: splitId } });
    const { split, bytesRead, inputBytes } = running.tablets[0]!;
    expect(split!.ecids).toContain(started.ecid);
    expect(split!.ecids.length).toBeGreaterThanOrEqual(2);
    const splitInputs = partly.splits.get(splitId)!.inputs;
    expect(inputBytes).toBe(splitInputs.reduce((n, f) => n + partly.files.get(f)!.size, 0));
    expect(bytesRead).toBeGreaterThanOrEqual(inputBytes! / 4);
    await cliOk(c, ['admin', 'compactions', 'cancel', first]);
    const cancelled = await s.tserver.waitForLog(
      (l) => l.msg === 'reservation cancelled' && l.ecid === started.ecid,
      15_000,
    );
    expect(cancelled).toMatchObject({ reason: 'admin' });
    const dropped = await waitFor(async () => {
      const t = await readTablet(s.meta, tablet);
      return !t.splits.has(splitId) && t.selection === undefined && t.userCompactions.size === 0 && t;
    }, 'the cancelled split to be dropped');
    expect([...dropped.files.keys()].every((f) => before.files.has(f))).toBe(true);
    expect(await scan()).toEqual(all);
    const st = await cliJson<UserCompactionStatus>(c, ['admin', 'compactions', 'status', first, '--json']);
    expect(st.tablets.map((t) => t.state)).toEqual(['cancelled']);
    slow.kill();

    // Requested again with compactors to run it (after the system work the first cancel let through):
    // every sub-job is a user sub-job, and `--wait` returns once the last one committed the rewrite.
    await c.startCompactor('q', { name: 'b', args: ['--throughput', '1500000'] });
    const second = await compact();
    const waited = await c.cli(['admin', 'compactions', 'status', second, '--wait']);
    expect(waited.code, waited.stderr).toBe(0);
    expect(await scan()).toEqual(all.filter((line) => !line.startsWith('r000')));
    const userSubJobs = s.tserver.lines.filter(
      (l) => l.msg === 'reserved' && l.kind === 'user' && l.split !== undefined && l.split !== splitId,
    );
    expect(new Set(userSubJobs.map((l) => l.subJob)).size).toBeGreaterThanOrEqual(2);
    const final = await readTablet(s.meta, tablet);
    expect(final.splits.size).toBe(0);
    expect(final.userCompactions.size).toBe(0);
    const lastSplit = userSubJobs.at(-1)!.split as string;
    expect([...final.files.values()].every((f) => f.group === lastSplit)).toBe(true);

    // The cancelled sub-job's output and every replaced file are collected; the check is clean.
    await new Promise((r) => setTimeout(r, 1_200));
    await s.meta.call('POST', '/v1/gc/run', {});
    const present: string[] = [];
    for await (const o of c.store().list('tables/')) present.push(o.name);
    expect(present.sort()).toEqual([...final.files.keys()].sort());
    const check = await c.cli(['admin', 'check', '--json']);
    const report = JSON.parse(check.stdout) as { problems: Record<string, { count: number }> };
    for (const [name, p] of Object.entries(report.problems)) expect(p.count, name).toBe(0);
  }, 150_000);
});
