/**
 * `excompact admin check` against real clusters: a consistent one reports ok (exit 0), and each kind of
 * damage made for real — an orphan object, a leftover temporary, a lost file, queue entries out of step,
 * a reservation whose compactor's node is gone — is reported by name (exit 5).
 */
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CheckReport } from '../../src/meta/check-view.js';
import { queueRow } from '../../src/meta/keys.js';
import { cliOk } from '../support/cli.js';
import {
  allTablets,
  queueRows,
  readTablet,
  useCluster,
  useProcesses,
  useS3,
  useZooKeeper,
  waitFor,
  type TableSetup,
  type TestCluster,
} from '../support/index.js';

const EXIT_INCONSISTENT = 5;

async function check(c: TestCluster): Promise<{ code: number | null; report: CheckReport }> {
  const r = await c.cli(['admin', 'check', '--json']);
  if (r.code !== 0 && r.code !== EXIT_INCONSISTENT) throw new Error(`check exited ${r.code}: ${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout) as CheckReport };
}

/** Three ingests into each of the two tablets (split at m): each then has work for the table's queue. */
async function fill(s: TableSetup): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const entries = ['a', 'x'].flatMap((p) =>
      Array.from({ length: 200 }, (_, j) => ({
        row: `${p}${j}`,
        cf: 'f',
        cq: 'q',
        ts: 10 + i,
        value: 'v'.repeat(100),
      })),
    );
    await s.client.ingest(s.table, entries);
  }
}

/** Counts of the problems found, by name (the lists with nothing in them left out). */
function found(report: CheckReport): Record<string, number | null> {
  return Object.fromEntries(
    Object.entries(report.problems).flatMap(([n, l]) => (l.count === 0 ? [] : [[n, l.count]])),
  );
}

describe('admin check', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('clean - a cluster that compacted and has garbage pending collection is consistent (exit 0)', async () => {
    const s = await cluster().startWithTable({ splits: ['m'] });
    await cluster().startCompactor(s.queue.name);
    await fill(s);
    await waitFor(async () => {
      const tablets = await allTablets(s.meta);
      const settled = tablets.every((t) => t.files.size === 1 && t.reservations.size === 0);
      return settled && (await queueRows(s.meta, s.queue.id)).length === 0;
    }, 'both tablets compacted to one file');

    const { code, report } = await check(cluster());
    expect(found(report)).toEqual({ unreferencedPendingGc: 6 }); // the compacted inputs: fine
    expect(report.ok).toBe(true);
    expect(code).toBe(0);
    expect(report.figures).toMatchObject({
      tablets: 2,
      hostedTablets: 2,
      files: 2,
      objects: 8,
      liveCompactors: 1,
    });
    const human = await cliOk(cluster(), ['admin', 'check']);
    expect(human).toMatch(/^consistent \(checked /);
    expect(human).toMatch(/\n {2}info +6 {2}unreferenced files marked for deletion \(pending GC\): tables\//);
    expect(human).toMatch(/second run/);
  });

  it('damage - lost file, orphan object, old temporary and queue entries out of step are each reported (exit 5)', async () => {
    const c = cluster();
    const s = await c.startWithTable({ splits: ['m'] });
    await fill(s);
    const [low, high] = s.tablets.map((t) => t.tablet) as [string, string];
    const tableId = s.tablets[0]!.tableId;
    const store = c.store();
    const dir = join(c.storePath, 'tables', tableId);
    // Older than the GC grace and the wait for the next sweep (a sweep interval and a cycle).
    const dayAgo = Date.now() / 1000 - 86_400;

    // Work missing from the queue: the low tablet's entry goes, behind its server's back.
    const [lowEntry] = (await queueRows(s.meta, s.queue.id)).filter((r) => r.endsWith(`:${low.slice(5)}`));
    expect(lowEntry).toBeDefined();
    await s.meta.mutate([{ deleteRows: [lowEntry!] }]);
    // An entry naming a tablet that does not exist.
    const ghost = queueRow({ queueId: s.queue.id, bin: 0, priority: 5, tableId: '0zzz', endRow: null });
    await s.meta.mutate([{ puts: [{ row: ghost, col: 'tablet', value: '{}' }] }]);
    // Data loss: a file the high tablet references is deleted from the store.
    const lost = [...(await readTablet(s.meta, high)).files.keys()][0]!;
    await store.delete(lost);
    // An orphan written an hour ago, a young unreferenced object, and an hour-old temporary file.
    await store.write(`tables/${tableId}/Iorphan.rf`, Buffer.from('orphan'));
    utimesSync(join(dir, 'Iorphan.rf'), dayAgo, dayAgo);
    await store.write(`tables/${tableId}/Iyoung.rf`, Buffer.from('young'));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '.Ihalf.rf.0123456789ab.tmp'), 'half');
    utimesSync(join(dir, '.Ihalf.rf.0123456789ab.tmp'), dayAgo, dayAgo);

    const { code, report } = await check(c);
    expect(code).toBe(EXIT_INCONSISTENT);
    expect(report.ok).toBe(false);
    expect(found(report)).toEqual({
      missingFiles: 1,
      queueEntriesWithoutWork: 1,
      workMissingFromQueue: 1,
      orphanFiles: 1,
      staleTemporaries: 1,
      unreferencedYoung: 1,
    });
    const p = report.problems;
    expect(p.missingFiles!.items).toEqual([{ file: lost, tablet: high }]);
    expect(p.queueEntriesWithoutWork!.items).toEqual([
      { entry: ghost, tablet: '0zzz<', queueId: s.queue.id, reason: 'no such tablet' },
    ]);
    expect(p.workMissingFromQueue!.items).toMatchObject([{ tablet: low, queue: s.queue.name }]);
    expect(p.orphanFiles!.items).toMatchObject([{ file: `tables/${tableId}/Iorphan.rf` }]);
    expect(p.staleTemporaries!.items).toMatchObject([{ target: `tables/${tableId}/Ihalf.rf` }]);
    expect(p.unreferencedYoung!.items).toMatchObject([{ file: `tables/${tableId}/Iyoung.rf` }]);

    const human = await c.cli(['admin', 'check']);
    expect(human.code).toBe(EXIT_INCONSISTENT);
    expect(human.stdout).toMatch(/^INCONSISTENT: 5 of 11 checks found problems/);
    expect(human.stdout).toContain(
      `  CRITICAL 1  referenced files missing from the object store: ${lost} (tablet ${high})`,
    );
    expect(human.stdout).toMatch(/\n {2}PROBLEM +1 {2}work missing from the queue: /);
    expect(human.stdout).toMatch(/\n {2}ok +0 {2}reservations naming dead compactors\n/);
  });

  it('selection - a pending user compaction is consistent; a system job over a selected and a later file is critical', async () => {
    const c = cluster();
    const s = await c.startWithTable();
    await fill(s); // three files, no compactor: nothing runs
    const row = s.tablets[0]!.tablet;
    await cliOk(c, ['admin', 'table', 'compact', s.table]);
    // The tablet server selects once the manager's notification reaches it (the command does not wait).
    const selection = await waitFor(
      async () => (await readTablet(s.meta, row)).selection,
      'the user compaction to be selected',
    );
    expect(selection.files).toHaveLength(3);
    await s.client.ingest(s.table, [{ row: 'b', cf: 'f', cq: 'q', ts: 20, value: 'later' }]);
    const later = [...(await readTablet(s.meta, row)).files.keys()].find((f) => !selection.files.includes(f));
    expect(later).toBeDefined();
    // A user compaction waiting for a compactor, beside a file ingested after its selection: all fine.
    expect(found((await check(c)).report)).toEqual({});

    // What a tablet server must never do: reserve a system job over a selected file after the selection
    // (written here behind its back, naming a compactor that never existed).
    const forged = {
      compactor: `${c.layout.queueNode(s.queue.id)}/c-9999999999`,
      queueId: s.queue.id,
      inputs: [selection.files[0]!, later!],
      output: `tables/${s.tablets[0]!.tableId}/Cforged.rf`,
      kind: 'system',
      attempt: 0,
      reservedAt: Date.now(),
      allFiles: false,
      settings: { versions: 1, nowMs: Date.now(), filters: [], dropDeletes: false },
    };
    await s.meta.mutate([{ puts: [{ row, col: 'ecomp:EFORGED', value: JSON.stringify(forged) }] }]);

    const { code, report } = await check(c);
    expect(code).toBe(EXIT_INCONSISTENT);
    expect(report.problems.selectionConflicts).toMatchObject({
      severity: 'critical',
      count: 1,
      items: [
        {
          tablet: row,
          job: 'EFORGED',
          files: [selection.files[0]],
          problem: 'system job over selected and unselected files',
        },
      ],
    });
    const human = await c.cli(['admin', 'check']);
    expect(human.stdout).toContain(
      `  CRITICAL 1  user compactions' selections shared with system jobs, or unlike their user jobs: ` +
        `EFORGED on ${row}: system job over selected and unselected files (${selection.files[0]})\n`,
    );
  });

  it('dead compactor - a reservation whose compactor node is deleted while its server is paused is reported', async () => {
    const c = cluster();
    const s = await c.startWithTable({ splits: ['m'] });
    await fill(s);
    // Slow enough to be still compacting when paused: 60 KB of input at 2 KB/s.
    const compactor = await c.startCompactor(s.queue.name, { args: ['--throughput', '2000'] });
    const started = await compactor.waitForLog((l) => l.msg === 'compaction started');
    expect((await check(c)).report.ok).toBe(true);

    // The tablet server is frozen first, so nothing cancels the reservation once the node is gone.
    s.tserver.pause();
    compactor.pause();
    const admin = await c.session();
    await admin.delete(compactor.compactor);

    const { code, report } = await check(c);
    expect(code).toBe(EXIT_INCONSISTENT);
    expect(report.problems.deadCompactorReservations).toMatchObject({
      count: 1,
      items: [{ ecid: started.ecid, tablet: started.tablet, compactor: compactor.compactor }],
    });
    expect(report.figures.liveCompactors).toBe(0);
  });
});

describe('admin check - S3', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const s3 = useS3();
  const cluster = useCluster(zk, procs, { env: () => s3().env });

  it('temporaries - an S3 server without ListMultipartUploads makes them "not checkable", not zero', async () => {
    const s = await cluster().startWithTable();
    await fill(s);
    const { code, report } = await check(cluster());
    expect(report.problems.staleTemporaries).toMatchObject({ count: null, items: [] });
    expect(report.problems.staleTemporaries!.notCheckable).toMatch(/ListMultipartUploads/);
    expect(report.figures.temporaries).toBeNull();
    expect(report.figures.objects).toBe(3);
    expect([code, report.ok]).toEqual([0, true]);
    const human = await cliOk(cluster(), ['admin', 'check']);
    expect(human).toMatch(
      /\n {2}n\/a +- {2}temporaries of unfinished writes older than the GC grace: not checkable \(/,
    );
  });
});
