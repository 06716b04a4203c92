/**
 * `admin compactions cancel <id>` on user compactions and parked jobs, against real processes: a pending
 * user compaction leaves every tablet and its filter is never applied; a running one has its job
 * cancelled (the compactor's commit is refused); a parked user job is cancelled on its tablet and frees
 * its files for system work, while a parked system job is refused with a clear error. Each state is read
 * back from the store and from `admin compactions status`, and the data is checked against a model.
 */
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../../src/meta/outcomes.js';
import { compactCol, parseTablet } from '../../src/meta/tablet.js';
import { cancelledCell, type UserCompactionStatus } from '../../src/meta/user-compactions.js';
import type { ParkedCompaction } from '../../src/meta/views.js';
import {
  DataModel,
  TestCompactor,
  scanLines,
  useCluster,
  useProcesses,
  useZooKeeper,
  waitFor,
  type TableSetup,
  type TestCluster,
} from '../support/index.js';
import { cliJson, cliOk } from '../support/cli.js';

const DROP_X = `dropRowPrefix:${JSON.stringify({ prefixes: ['x'] })}`;

let clock = 1_000;
function batch(prefix: string, n: number): ClientEntry[] {
  const ts = clock++;
  return Array.from({ length: n }, (_, i) => ({
    row: `${prefix}${String(i).padStart(4, '0')}`,
    cf: 'f',
    cq: 'q',
    ts,
    value: `v${ts}`,
  }));
}

describe('cancelling user compactions and parked jobs', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  /**
   * A table whose tablets each hold three files of the same size (rows a… and x…, overwritten: worth a
   * system compaction), no compactor running.
   */
  async function setup(c: TestCluster, splits: string[] = []) {
    const s = await c.startWithTable({
      table: 'events',
      queue: 'q',
      splits,
      config: { maxAttempts: 1, compression: 'none' },
    });
    const model = new DataModel();
    for (let i = 0; i < 3; i++) {
      const entries = [...batch('a', 20), ...batch('x', 20)];
      model.write(entries);
      await s.client.ingest(s.table, entries);
    }
    return { s, model };
  }

  const compact = async (c: TestCluster) =>
    (await cliJson<{ id: string }>(c, ['admin', 'table', 'compact', 'events', '--filter', DROP_X, '--json']))
      .id;
  const status = (c: TestCluster, id: string) =>
    cliJson<UserCompactionStatus>(c, ['admin', 'compactions', 'status', id, '--json']);
  const tablet = async (s: TableSetup, row: string) => parseTablet(row, await s.meta.row(row));
  const parked = async (c: TestCluster) =>
    (await cliJson<{ parked: ParkedCompaction[] }>(c, ['admin', 'compactions', 'list', '--state', 'parked']))
      .parked;

  it('a pending user compaction: cancelled on every tablet, its filter never applied, system work goes on', async () => {
    const c = cluster();
    const { s, model } = await setup(c, ['m']);
    const id = await compact(c);
    // Each tablet server selects the files once told of the request: not necessarily before the command
    // returns (under load, the first read once came before it).
    await waitFor(async () => {
      const rows = await Promise.all(s.tablets.map((t) => tablet(s, t.tablet)));
      return rows.every((t) => t.selection?.ids.length === 1 && t.selection.ids[0] === id);
    }, 'both tablets to select their files for the request');

    expect(await cliOk(c, ['admin', 'compactions', 'cancel', id])).toBe(
      `cancelled user compaction ${id} of events on 2 tablets\n`,
    );
    // The tablet servers drop the selection as soon as they are told.
    await waitFor(async () => {
      const rows = await Promise.all(s.tablets.map((t) => tablet(s, t.tablet)));
      return rows.every((t) => t.selection === undefined && t.userCompactions.size === 0);
    }, 'the selections to be dropped');
    const st = await status(c, id);
    expect(st.tablets.map((t) => t.state)).toEqual(['cancelled', 'cancelled']);
    expect(st).toMatchObject({ done: true, cancelled: 2 });
    expect(await cliOk(c, ['admin', 'compactions', 'cancel', id])).toBe(
      `user compaction ${id} was cancelled already\n`,
    );
    // `table compact --wait` of a compaction cancelled while it waits does not report success.
    const waiting = c.cli(['admin', 'table', 'compact', 'events', '--wait']);
    const first = s.tablets[0]!.tablet;
    const again = await waitFor(
      async () => [...(await tablet(s, first)).userCompactions.keys()][0],
      'the second request',
    );
    await cliOk(c, ['admin', 'compactions', 'cancel', again]);
    const waited = await waiting;
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(`compaction ${again} was cancelled by an admin on 2 of 2 tablet(s)`);

    // A compactor now runs system jobs only: every tablet ends with one file, the x rows still there.
    await c.startCompactor('q');
    await waitFor(async () => {
      const rows = await Promise.all(s.tablets.map((t) => tablet(s, t.tablet)));
      return rows.every((t) => t.files.size === 1 && t.reservations.size === 0);
    }, 'system compactions');
    expect(await scanLines(s.client, 'events')).toEqual(model.expected());
  });

  it('a running user compaction: its job is cancelled and its commit refused', async () => {
    const c = cluster();
    const { s, model } = await setup(c);
    const row = s.tablets[0]!.tablet;
    const id = await compact(c);
    const holder = await TestCompactor.start(c, 'q');
    const job = await waitFor(() => holder.reserve(row), 'the user job to be reserved');
    expect(job.kind).toBe('user');
    const result = await holder.compact(job);

    expect(await cliOk(c, ['admin', 'compactions', 'cancel', id])).toBe(
      `cancelled user compaction ${id} of events on 1 tablet\n`,
    );
    const outcome = await waitFor(
      async () => parseOutcome((await s.meta.row(doneRow(job.ecid))).get(COL_OUTCOME) ?? ''),
      'the job to end',
    );
    expect(outcome).toMatchObject({ outcome: 'cancelled', reason: 'admin' });
    await expect(holder.commit(job, result)).rejects.toMatchObject({ code: 'RESERVATION_GONE' });
    await holder.close();
    const t = await tablet(s, row);
    expect(t.selection).toBeUndefined();
    expect(t.failures.size).toBe(0); // an admin's cancel is no failure
    expect((await status(c, id)).tablets[0]!.state).toBe('cancelled');
    expect(await scanLines(s.client, 'events')).toEqual(model.expected());
  });

  it('a user compaction cancelled before its tablet server heard of it: the commit is refused, the filter never applied', async () => {
    const c = cluster();
    const { s, model } = await setup(c);
    const row = s.tablets[0]!.tablet;
    const id = await compact(c);
    const holder = await TestCompactor.start(c, 'q');
    const job = await waitFor(() => holder.reserve(row), 'the user job to be reserved');
    expect(job.kind).toBe('user');
    const result = await holder.compact(job);
    // What the manager's cancel writes, without the notification that tells the tablet server.
    await s.meta.mutate([
      { deletes: [{ row, col: compactCol(id) }], puts: [cancelledCell(id, row, Date.now())] },
    ]);
    await expect(holder.commit(job, result)).rejects.toMatchObject({ code: 'RESERVATION_GONE' });
    await holder.close();
    const outcome = parseOutcome((await s.meta.row(doneRow(job.ecid))).get(COL_OUTCOME) ?? '');
    expect(outcome).toMatchObject({ outcome: 'cancelled', reason: 'admin' });
    expect(await scanLines(s.client, 'events')).toEqual(model.expected());
    expect((await status(c, id)).tablets[0]!.state).toBe('cancelled');
  });

  it('a parked user job: cancelled on its tablet, its files go to system work; a parked system job is refused', async () => {
    const c = cluster();
    const { s, model } = await setup(c);
    const row = s.tablets[0]!.tablet;
    const id = await compact(c);
    const holder = await TestCompactor.start(c, 'q');
    const failOne = async (kind: 'user' | 'system') => {
      const job = await waitFor(() => holder.reserve(row), `a ${kind} job`);
      expect(job.kind).toBe(kind);
      await holder.fail(job, `${kind} job failed on purpose`);
      return job;
    };

    // maxAttempts=1: one failure parks the user job.
    const userJob = await failOne('user');
    const [job] = await parked(c);
    expect(job).toMatchObject({ tablet: row, userCompactionIds: [id], lastEcid: userJob.ecid });
    expect(await cliOk(c, ['admin', 'compactions', 'cancel', job!.id])).toBe(
      `cancelled parked job ${job!.id} on tablet ${row} (user compaction ${id})\n`,
    );
    expect(await parked(c)).toEqual([]);
    expect((await status(c, id)).tablets[0]!.state).toBe('cancelled');

    // Its files are free: the tablet plans a system job over them. Parked in turn, it cannot be
    // cancelled (the tablet would plan it again), only released.
    const systemJob = await failOne('system');
    const [sys] = await parked(c);
    expect(sys).toMatchObject({ tablet: row, userCompactionIds: [], lastEcid: systemJob.ecid });
    const refused = await c.cli(['admin', 'compactions', 'cancel', sys!.id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`parked job ${sys!.id} on tablet ${row} is a system compaction`);
    expect(await parked(c)).toHaveLength(1);
    await holder.close();

    await cliOk(c, ['admin', 'compactions', 'release', sys!.id]);
    await c.startCompactor('q');
    await waitFor(async () => (await tablet(s, row)).files.size === 1, 'the system job to commit');
    expect(await scanLines(s.client, 'events')).toEqual(model.expected());
  });
});
