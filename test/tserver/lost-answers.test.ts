/**
 * The tablet server when the metadata store's answers get lost: a change that was applied but not
 * confirmed (a timeout, a connection cut after the request went out), table settings that cannot be
 * read, a user compaction that keeps failing. The real Hosting and Reservations code runs against a real
 * (in-memory) SQLite metadata store; only the transport to it is a stand-in that can lose answers, and
 * the compactor watch is a stand-in that says every compactor lives.
 */
import { describe, expect, it, vi } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import type { MetaClient } from '../../src/meta/client.js';
import { queuePrefix } from '../../src/meta/keys.js';
import { ingestRow } from '../../src/meta/ingest-ids.js';
import { MetaStore } from '../../src/meta/store.js';
import { tableConfigSchema, type TableConfigInput } from '../../src/meta/table-config.js';
import {
  compactCol,
  ecompCol,
  failedCol,
  fileCol,
  locationValue,
  parseTablet,
} from '../../src/meta/tablet.js';
import type { Mutation } from '../../src/meta/types.js';
import type { QueueResolver } from '../../src/queue/resolver.js';
import type { CompactorWatch } from '../../src/tserver/compactor-watch.js';
import { failureKey } from '../../src/tserver/hosted-tablet.js';
import { Hosting } from '../../src/tserver/hosting.js';
import { Reconciler } from '../../src/tserver/reconciler.js';
import { Reservations } from '../../src/tserver/reservations.js';
import type { TableConfigs } from '../../src/tserver/table-configs.js';
import { ZkLayout } from '../../src/zk/layout.js';

const me = { server: 'ts:1', session: '00000000000000aa' };
const row = '0001<';
const queue = { name: 'q', id: 'abcd', bins: 4 };
const layout = new ZkLayout('/excompact');
const compactor = (n: number) => `${layout.queueNode(queue.id)}/c-000000000${n}`;
const file = (name: string) => ({ row, col: fileCol(name), value: JSON.stringify({ size: 10, entries: 1 }) });

function world(options: { files?: string[]; config?: TableConfigInput; extra?: Mutation['puts'] } = {}) {
  const store = new MetaStore({ path: ':memory:' });
  store.mutate({
    puts: [
      { row, col: 'prev', value: 'null' },
      { row, col: 'future', value: locationValue(me) },
      ...(options.files ?? ['a', 'b', 'c']).map(file),
      ...(options.extra ?? []),
    ],
  });
  let loseNext = 0;
  let delayNext = false;
  let held: Mutation[] | undefined;
  let refuseNext: ExcError | undefined;
  let reads = 0;
  let writes = 0;
  let applyAfterRowRead = false;
  let configDown = false;
  let readsDown = false;
  let readsDownAfterLoss = false;
  const meta = {
    row: async (r: string) => {
      reads++;
      if (readsDown) throw new ExcError('UNAVAILABLE', 'manager unreachable');
      const cols = store.row(r);
      if (r === row && applyAfterRowRead && held) {
        // The stuck change commits just after this read of the tablet's row: between two reads.
        applyAfterRowRead = false;
        store.applyBatch(held);
        held = undefined;
      }
      return cols;
    },
    // Applies the mutations, then (when asked) loses the answer, as a timeout after sending would; or
    // (when asked) refuses them unapplied, as a manager that is stopping does.
    mutate: async (mutations: Mutation[]) => {
      writes++;
      const refusal = refuseNext;
      refuseNext = undefined;
      if (refusal) throw refusal;
      if (delayNext) {
        // The request is stuck on its way (a manager too slow to answer in time): it is applied later,
        // after the read-back that follows the timeout.
        delayNext = false;
        held = mutations;
        throw new ExcError('TIMEOUT', 'POST /v1/meta/mutate: no answer within 10000 ms', {
          details: { sent: true },
        });
      }
      const results = store.applyBatch(mutations);
      if (loseNext > 0) {
        loseNext--;
        if (readsDownAfterLoss) readsDown = true;
        throw new ExcError('TIMEOUT', 'POST /v1/meta/mutate: no answer within 10000 ms', {
          details: { sent: true },
        });
      }
      return results;
    },
  } as unknown as MetaClient;
  const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }], ...options.config });
  const configs = {
    get: async () => {
      if (configDown) throw new ExcError('UNAVAILABLE', 'manager unreachable');
      return { id: '0001', name: 't', state: 'online' as const, config };
    },
  } as unknown as TableConfigs;
  const watch = {
    knownAlive: () => true,
    checkAndWatch: async () => true,
    add() {},
    remove() {},
    sweep: async () => undefined,
  } as unknown as CompactorWatch;
  const queues = { byQueueName: (n: string) => (n === 'q' ? queue : undefined) } as unknown as QueueResolver;
  const hosting = new Hosting({
    me,
    meta,
    queues,
    configs,
    watch,
    log: silentLogger(),
    onFenced() {},
    resyncForMs: 1_000,
  });
  const reservations = new Reservations({
    hosting,
    watch,
    configs,
    layout,
    queueIdOf: (n) => (n === 'q' ? queue.id : undefined),
    queueExists: async () => true,
    outputSize: async () => 5,
    log: silentLogger(),
  });
  return {
    store,
    hosting,
    reservations,
    /** The next `n` changes are applied and their answers lost; then, with `readsDown`, reads fail too. */
    loseNextAnswer: (n = 1, options: { readsDown?: boolean } = {}) => {
      loseNext = n;
      readsDownAfterLoss = options.readsDown ?? false;
    },
    /** The next change times out unapplied; `applyLate` applies it (after whatever read-back happened). */
    delayNext: () => (delayNext = true),
    applyLate: () => {
      const results = held ? store.applyBatch(held) : [];
      held = undefined;
      return results;
    },
    /** The change held by delayNext is applied right after the next read of the tablet's row. */
    applyAfterNextRowRead: () => (applyAfterRowRead = true),
    refuseNext: (err: ExcError) => (refuseNext = err),
    reads: () => reads,
    writes: () => writes,
    setConfigDown: (down: boolean) => (configDown = down),
    setReadsDown: (down: boolean) => (readsDown = down),
    reconciler: new Reconciler(hosting, watch, silentLogger()),
    stored: () => parseTablet(row, store.row(row)),
    entries: () => store.scan({ prefix: queuePrefix(queue.id) }).cells.map((c) => c.row),
  };
}

describe('tablet server - lost answers', () => {
  it('load: a takeover whose answer was lost still hosts the tablet', async () => {
    const w = world();
    w.loseNextAnswer();
    await w.hosting.load(row);
    expect(w.stored().loc).toEqual(me);
    expect((await w.hosting.get(row)).meta.files.size).toBe(3);
  });

  it('load: a takeover whose answer was lost and could not be read back is hosted by the next reconciler round', async () => {
    const w = world();
    // The manager unreachable, right after applying the takeover, for longer than the read-back tries.
    w.loseNextAnswer(1, { readsDown: true });
    await expect(w.hosting.load(row)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    // The store names this server: the manager counts the tablet hosted and sends no load again.
    expect(w.stored().loc).toEqual(me);
    await expect(w.hosting.get(row)).rejects.toMatchObject({ code: 'NOT_SERVING' });
    w.setReadsDown(false);
    await w.reconciler.runRound();
    expect((await w.hosting.get(row)).meta.files.size).toBe(3);
    expect(w.hosting.count).toBe(1);
  });

  it('load: a takeover refused for certain is not retried by the reconciler', async () => {
    const w = world();
    w.refuseNext(
      new ExcError('SHUTTING_DOWN', 'manager stopping', {
        details: { status: 503, sent: true, notApplied: true, remoteCode: 'SHUTTING_DOWN' },
      }),
    );
    await expect(w.hosting.load(row)).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    const writes = w.writes();
    await w.reconciler.runRound();
    expect(w.writes()).toBe(writes); // the manager sends the load again: the future still names this server
    expect(w.hosting.count).toBe(0);
  });

  it('commit: applied but unconfirmed is reported as committed; memory and store agree', async () => {
    const w = world();
    await w.hosting.load(row);
    const job = (await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(1) }))!;
    w.loseNextAnswer();
    await w.reservations.commit({
      tablet: row,
      ecid: job.ecid,
      compactor: compactor(1),
      output: { size: 5, entries: 1 },
    });

    const memory = (await w.hosting.get(row)).meta;
    const stored = w.stored();
    expect([...memory.files.keys()]).toEqual([job.output]);
    expect([...stored.files.keys()]).toEqual([job.output]);
    expect(memory.reservations.size).toBe(0);
    expect(stored.reservations.size).toBe(0);
    // A repeated commit (the compactor did not hear the answer either) is refused, and changes nothing.
    await expect(
      w.reservations.commit({
        tablet: row,
        ecid: job.ecid,
        compactor: compactor(1),
        output: { size: 5, entries: 1 },
      }),
    ).rejects.toMatchObject({
      code: 'RESERVATION_GONE',
    });
    expect([...w.stored().files.keys()]).toEqual([job.output]);
  });

  it('reserve: a change applied after the read-back that followed its timeout is never contradicted (found with the chaos run)', async () => {
    const w = world();
    await w.hosting.load(row);
    const req = {
      tablet: row,
      queueId: queue.id,
      compactor: compactor(1),
      requestId: '01ARZ3NDEKTSV4RRFFQ69G5FAV',
    };
    w.delayNext();
    await expect(w.reservations.reserve(req)).rejects.toMatchObject({ code: 'OUTCOME_UNKNOWN' });
    expect(w.stored().reservations.size).toBe(0); // the read-back saw nothing: not applied yet
    expect(w.applyLate()).toEqual([{ applied: true }]); // and then it was
    const late = [...w.stored().reservations.keys()];
    expect(late).toHaveLength(1);

    // The compactor repeats its request. The tablet's copy no longer matches the store: nothing is decided
    // from it — the change is refused by its version, the tablet read back, and the repeat then finds the
    // reservation the late change made (never a second one over the same files).
    let job = await w.reservations.reserve(req).catch((err: ExcError) => err);
    if (job instanceof ExcError) {
      expect(job.code).toBe('OUTCOME_UNKNOWN');
      job = await w.reservations.reserve(req);
    }
    expect(job?.ecid).toBe(late[0]);
    expect([...w.stored().reservations.keys()]).toEqual(late);
    expect([...(await w.hosting.get(row)).meta.reservations.keys()]).toEqual(late);
  });

  it('ingest-like change: a file added late is in the tablet copy before the next change is decided', async () => {
    const w = world();
    await w.hosting.load(row);
    const tablet = await w.hosting.get(row);
    const addFile = (name: string) =>
      tablet.mutex.run(() =>
        w.hosting.change(tablet, {
          puts: [file(name)],
          apply: (m) => m.files.set(name, { size: 10, entries: 1 }),
          replan: true,
        }),
      );
    w.delayNext();
    await expect(addFile('late')).rejects.toMatchObject({ code: 'OUTCOME_UNKNOWN' });
    w.applyLate();
    await expect(addFile('next')).rejects.toMatchObject({ code: 'OUTCOME_UNKNOWN' }); // refused: stale copy
    expect(await addFile('next')).toBe(true);
    expect([...(await w.hosting.get(row)).meta.files.keys()].sort()).toEqual(['a', 'b', 'c', 'late', 'next']);
    expect([...w.stored().files.keys()].sort()).toEqual(['a', 'b', 'c', 'late', 'next']);
  });

  it("ingest: a change applied between the read-back's reads of the tablet and of its ingest ids is seen whole (found by a review)", async () => {
    const w = world();
    await w.hosting.load(row);
    const tablet = await w.hosting.get(row);
    // What an ingest of batch X.0 changes: a file in the tablet's row, the batch's id in its ingest row.
    const ingest = () =>
      tablet.mutex.run(async () => {
        if (tablet.stale) await w.hosting.resync(tablet);
        if (tablet.meta.ingests.has('X.0')) return false; // a repeat: already applied
        return w.hosting.change(tablet, {
          conditions: [{ op: 'absent', row: ingestRow(row), col: 'X.0' }],
          puts: [file('x'), { row: ingestRow(row), col: 'X.0', value: String(Date.now()) }],
          apply: (m) => {
            m.files.set('x', { size: 10, entries: 1 });
            m.ingests.set('X.0', { at: Date.now() });
          },
          replan: true,
        });
      });
    w.delayNext();
    w.applyAfterNextRowRead();
    await expect(ingest()).rejects.toMatchObject({ code: 'OUTCOME_UNKNOWN' });
    expect(w.stored().files.has('x')).toBe(true); // applied, during the read-back
    // The copy has both the file and the id, or neither: never the id without the file, which answered
    // the client's retry "duplicate" while scans left the file out for as long as the tablet was idle.
    const copy = (await w.hosting.get(row)).meta;
    expect(copy.ingests.has('X.0')).toBe(copy.files.has('x'));
    let repeat = await ingest().catch((err: ExcError) => err);
    if (repeat instanceof ExcError) repeat = await ingest();
    expect(repeat).toBe(false);
    const after = (await w.hosting.get(row)).meta;
    expect(after.files.has('x')).toBe(true);
    expect(after.version).toBe(w.stored().version);
  });

  it('reserve: applied but unconfirmed returns the reservation; no second one shares its files', async () => {
    const w = world();
    await w.hosting.load(row);
    w.loseNextAnswer();
    const first = await w.reservations.reserve({
      tablet: row,
      queueId: queue.id,
      compactor: compactor(1),
      requestId: '01ARZ3NDEKTSV4RRFFQ69G5FAV',
    });
    expect(first?.inputs.map((i) => i.name).sort()).toEqual(['a', 'b', 'c']);
    expect(
      await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(2) }),
    ).toBeNull();
    expect(w.stored().reservations.size).toBe(1);
    // The compactor repeats the request it did not hear back from: same reservation.
    const again = await w.reservations.reserve({
      tablet: row,
      queueId: queue.id,
      compactor: compactor(1),
      requestId: '01ARZ3NDEKTSV4RRFFQ69G5FAV',
    });
    expect(again?.ecid).toBe(first?.ecid);
    expect(w.stored().reservations.size).toBe(1);
  });

  it('cancel: applied but unconfirmed is done; the tablet requeues the work', async () => {
    const w = world();
    await w.hosting.load(row);
    const job = (await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(1) }))!;
    expect(w.entries()).toEqual([]);
    w.loseNextAnswer();
    expect(await w.reservations.cancel(row, job.ecid, 'admin')).toBe(true);
    expect(w.stored().reservations.size).toBe(0);
    expect(w.entries()).toHaveLength(1);
    const next = await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(2) });
    expect(next?.inputs).toHaveLength(3);
  });

  it('a reservation stored in another byte layout (an older writer) can still be committed and cancelled', async () => {
    const stored = (inputs: string[], output: string) => ({
      // Keys in another order and spaced out: the same reservation, not the same bytes.
      settings: { dropDeletes: false, filters: [], nowMs: 1, versions: 1 },
      reservedAt: 1,
      kind: 'system',
      attempt: 0,
      allFiles: false,
      output,
      inputs,
      queueId: queue.id,
      compactor: compactor(1),
    });
    const ecids = ['01ARZ3NDEKTSV4RRFFQ69G5FA1', '01ARZ3NDEKTSV4RRFFQ69G5FA2'];
    const w = world({
      extra: [
        { row, col: ecompCol(ecids[0]!), value: JSON.stringify(stored(['a'], 'out1'), null, 1) },
        { row, col: ecompCol(ecids[1]!), value: JSON.stringify(stored(['b'], 'out2'), null, 1) },
      ],
    });
    await w.hosting.load(row);
    await w.reservations.commit({
      tablet: row,
      ecid: ecids[0]!,
      compactor: compactor(1),
      output: { size: 5, entries: 1 },
    });
    expect(await w.reservations.cancel(row, ecids[1]!, 'admin')).toBe(true);
    expect(w.stored().reservations.size).toBe(0);
    expect([...w.stored().files.keys()].sort()).toEqual(['b', 'c', 'out1']);
  });

  it('a change the manager refused unapplied (stopping, overloaded) is not read back', async () => {
    const w = world();
    await w.hosting.load(row);
    const tablet = await w.hosting.get(row);
    const readsBefore = w.reads();
    w.refuseNext(
      new ExcError('SHUTTING_DOWN', 'manager stopping', {
        details: { status: 503, sent: true, notApplied: true, remoteCode: 'SHUTTING_DOWN' },
      }),
    );
    await expect(
      tablet.mutex.run(() =>
        w.hosting.change(tablet, {
          puts: [file('d')],
          apply: (m) => m.files.set('d', { size: 10, entries: 1 }),
          replan: true,
        }),
      ),
    ).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(tablet.stale).toBe(false);
    expect(w.reads()).toBe(readsBefore);
    expect(tablet.meta.files.has('d')).toBe(false);
  });

  it('progress reports arriving together are persisted once', async () => {
    const w = world();
    await w.hosting.load(row);
    const job = (await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(1) }))!;
    const writesBefore = w.writes();
    const report = (n: number) =>
      w.reservations.progress(row, job.ecid, compactor(1), {
        entriesRead: n,
        entriesWritten: n,
        bytesRead: n,
        bytesWritten: n,
      });
    await Promise.all([report(1), report(2), report(3)]);
    expect(w.writes() - writesBefore).toBe(1);
    expect(w.stored().progress.get(job.ecid)?.entriesRead).toBe(1);
    await report(4); // within the persisting interval: kept in memory only
    expect(w.writes() - writesBefore).toBe(1);
  });

  it('progress - output still being written counts as progress, the same figures again do not', async () => {
    const w = world();
    await w.hosting.load(row);
    const job = (await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(1) }))!;
    const tablet = await w.hosting.get(row);
    const report = (bytesWritten: number) =>
      w.reservations.progress(row, job.ecid, compactor(1), {
        entriesRead: 10,
        entriesWritten: 10,
        bytesRead: 100,
        bytesWritten,
      });
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(1_000_000);
      await report(50);
      vi.setSystemTime(1_060_000);
      await report(80); // everything read; the output is still growing
      expect(tablet.reported.get(job.ecid)?.movedAt).toBe(1_060_000);
      vi.setSystemTime(1_120_000);
      await report(80);
      expect(tablet.reported.get(job.ecid)?.movedAt).toBe(1_060_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('queue entries stay when the table settings cannot be read, and are planned again once they can', async () => {
    const w = world();
    await w.hosting.load(row);
    const before = w.entries();
    expect(before).toHaveLength(1);
    w.setConfigDown(true);
    const tablet = await w.hosting.get(row);
    await tablet.mutex.run(() =>
      w.hosting.change(tablet, {
        puts: [file('d')],
        apply: (m) => m.files.set('d', { size: 10, entries: 1 }),
        replan: true,
      }),
    );
    expect(w.entries()).toEqual(before);
    expect(tablet.replanNeeded).toBe(true);
    w.setConfigDown(false);
    await tablet.mutex.run(() => w.hosting.change(tablet, { replan: true }));
    expect(tablet.replanNeeded).toBe(false);
    expect(w.entries()).toHaveLength(1);
    expect(w.entries()[0]).not.toBe(before[0]); // four files now: a higher priority
  });

  it('a failed plan is settled by the next plan even when the queue entries need no change', async () => {
    const w = world();
    await w.hosting.load(row);
    const before = w.entries();
    const tablet = await w.hosting.get(row);
    w.setConfigDown(true);
    await tablet.mutex.run(() => w.hosting.change(tablet, { replan: true }));
    expect(tablet.replanNeeded).toBe(true);
    w.setConfigDown(false);
    // Nothing changed meanwhile, so there is nothing to write: the tablet must still stop asking for plans.
    await tablet.mutex.run(() => w.hosting.change(tablet, { replan: true }));
    expect(w.entries()).toEqual(before);
    expect(tablet.replanNeeded).toBe(false);
  });

  it('a user compaction that keeps failing is parked like any job, and system work goes on', async () => {
    const files = ['a', 'b', 'c'];
    const failure = { inputs: files, attempts: 3, lastError: 'CORRUPT_FILE', at: 1, parked: true };
    const w = world({
      files,
      extra: [
        {
          row,
          col: compactCol('01ARZ3NDEKTSV4RRFFQ69G5FAV'),
          value: JSON.stringify({ requestedAt: 1, filters: [] }),
        },
        { row, col: failedCol(failureKey(files)), value: JSON.stringify(failure) },
      ],
    });
    await w.hosting.load(row);
    // All three files are parked, so nothing at all is planned; once one more file arrives the parked
    // user job still is not retried, and the new file waits for company.
    expect(
      await w.reservations.reserve({ tablet: row, queueId: queue.id, compactor: compactor(1) }),
    ).toBeNull();
    const tablet = await w.hosting.get(row);
    expect(await w.hosting.planFor(tablet)).toEqual([]);
    // Raising maxAttempts releases it: the user job is planned again.
    const released = world({
      files,
      config: { maxAttempts: 5 },
      extra: [
        {
          row,
          col: compactCol('01ARZ3NDEKTSV4RRFFQ69G5FAV'),
          value: JSON.stringify({ requestedAt: 1, filters: [] }),
        },
        { row, col: failedCol(failureKey(files)), value: JSON.stringify(failure) },
      ],
    });
    await released.hosting.load(row);
    const job = await released.reservations.reserve({
      tablet: row,
      queueId: queue.id,
      compactor: compactor(1),
    });
    expect(job?.kind).toBe('user');
  });
});
