/**
 * The collector's reference index on a real SQLite store and commit queue: a cycle answers from it
 * without reading the tablets, a reference added by any applied mutation keeps its file, a batch whose
 * outcome is unknown makes the index read the store again, and a write that bypassed the commit queue
 * (what a bug would do) is found by the check every sweep makes, and a store a newer manager holds is
 * not compared with at all. The index of activity is checked on its own timer, likewise.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { GarbageCollector } from '../../src/manager/gc.js';
import { ReferenceIndex } from '../../src/manager/gc-index.js';
import { FollowedIndex, checkEvery } from '../../src/manager/followed-index.js';
import { ActivityTable } from '../../src/manager/tablet-activity.js';
import { createLogger } from '../../src/log.js';
import type { MetaBackend, MetaReader } from '../../src/meta/backend.js';
import { delRow, tabletRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import type { Mutation, MutationResult, ScanRequest } from '../../src/meta/types.js';
import { InlineWriter, WorkerWriter, type BatchWriter } from '../../src/meta/writer.js';
import { MemoryObjectStore } from '../../src/storage/memory.js';
import { tempDir } from '../support/index.js';

const COMPILED_WORKER = new URL('../../dist/meta/write-worker.js', import.meta.url);
const ROW = tabletRow('0001', null);
const A = 'tables/0001/A.rf';
const B = 'tables/0001/B.rf';
const fileCell = (file: string) => ({ row: ROW, col: `file:${file}`, value: '{"size":1,"entries":1}' });
/** A mark written long ago: past any grace. */
const oldMark = (file: string) => ({ row: delRow(file), col: 'at', value: '1' });

/** `backend`, counting the scans of tablet rows it and its snapshots make. */
function counting(backend: SqliteBackend): { store: MetaBackend; tabletScans: () => number } {
  let scans = 0;
  const count = (reader: MetaReader) => (request: ScanRequest) => {
    if (!(request.prefix ?? request.start ?? '').startsWith('~')) scans++;
    return reader.scan(request);
  };
  const store = Object.assign(Object.create(backend) as MetaBackend, {
    scan: count(backend),
    snapshot: <T>(read: (r: MetaReader) => Promise<T>) =>
      backend.snapshot((r) => read({ get: r.get.bind(r), row: r.row.bind(r), scan: count(r) })),
  });
  return { store, tabletScans: () => scans };
}

describe('reference index', () => {
  let dir: ReturnType<typeof tempDir>;
  let meta: MetaStore;
  let epoch: number;
  beforeEach(() => {
    dir = tempDir('gc-index');
    meta = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    epoch = meta.takeOver();
  });
  afterEach(() => {
    meta.close();
    dir.cleanup();
  });

  it('keeps what a mutation references and collects it once no tablet does, reading no tablet', async () => {
    const commits = new CommitQueue(new InlineWriter(meta), () => true, silentLogger());
    const submit = (m: Mutation) => commits.submit({ mutations: [m] });
    const objects = new MemoryObjectStore();
    for (const f of [A, B]) await objects.write(f, Buffer.from('x'));
    await submit({ puts: [fileCell(A)] });
    const { store, tabletScans } = counting(new SqliteBackend(meta));
    const gc = new GarbageCollector(
      store,
      commits,
      objects,
      { graceMs: 1_000, intervalMs: 60_000, sweepIntervalMs: 3_600_000, epoch },
      silentLogger(),
    );
    await gc.runCycle(); // the first cycle builds the index from a snapshot
    const built = tabletScans();
    expect(built).toBeGreaterThan(0);

    // B is referenced after the build, then both are marked: B's reference keeps it.
    await submit({ puts: [fileCell(B), oldMark(A), oldMark(B)], deletes: [{ row: ROW, col: `file:${A}` }] });
    await gc.runCycle();
    const left = async () => {
      const out: string[] = [];
      for await (const o of objects.list('tables/')) out.push(o.name);
      return out;
    };
    expect(await left()).toEqual([B]);
    expect(meta.row(delRow(B)).get('at')).toBe('1');

    // The row goes: B is no longer referenced by anything.
    await submit({ deleteRows: [ROW] });
    await gc.runCycle();
    expect(await left()).toEqual([]);
    expect(tabletScans()).toBe(built);
    await gc.stop();
  });

  it('reads the store again after a batch whose outcome is unknown', async () => {
    // A writer whose first answer is lost after the batch committed.
    const inline = new InlineWriter(meta);
    let loseNext = false;
    const writer: BatchWriter = {
      takeOver: () => inline.takeOver(),
      close: () => inline.close(),
      apply: async (mutations: Mutation[]): Promise<MutationResult[]> => {
        const results = await inline.apply(mutations);
        if (loseNext) {
          loseNext = false;
          throw new Error('connection lost after COMMIT');
        }
        return results;
      },
    };
    const commits = new CommitQueue(writer, () => true, silentLogger());
    const index = new ReferenceIndex(new SqliteBackend(meta), commits);
    expect((await index.current()).referenced.has(A)).toBe(false);
    loseNext = true;
    await expect(commits.submit({ mutations: [{ puts: [fileCell(A)] }] })).rejects.toThrow(/connection lost/);
    const table = await index.current();
    expect(table.referenced.has(A)).toBe(true);
    expect(index.stats.builds).toBe(2);
    expect(await index.verify()).toEqual([]);
    loseNext = true;
    await expect(commits.submit({ mutations: [{ deleteRows: [ROW] }] })).rejects.toThrow(/connection lost/);
    // Uncertain: no comparison, a new build.
    expect(await index.verify()).toBeUndefined();
    expect((await index.current()).referenced.has(A)).toBe(false);
    index.stop();
  });

  it('finds, counts and repairs a reference written past the commit queue', async () => {
    const commits = new CommitQueue(new InlineWriter(meta), () => true, silentLogger());
    const backend = new SqliteBackend(meta);
    const index = new ReferenceIndex(backend, commits);
    await commits.submit({ mutations: [{ puts: [fileCell(A)] }] });
    await index.current();
    await commits.submit({ mutations: [{ puts: [fileCell(B)], deletes: [{ row: ROW, col: `file:${A}` }] }] });
    expect(await index.verify()).toEqual([]);
    // What a bug would do: a write the commit queue never saw.
    meta.applyBatch([{ puts: [fileCell(A)] }]);
    expect(await index.verify()).toEqual([A]);
    expect(index.stats.mismatches).toBe(1);
    expect((await index.current()).referenced.has(A)).toBe(true);
    expect(await index.verify()).toEqual([]);
    index.stop();
  });

  it('refuses to compare with a store a newer manager holds, and fences its collector', async () => {
    const commits = new CommitQueue(new InlineWriter(meta), () => true, silentLogger());
    const backend = new SqliteBackend(meta);
    const index = new ReferenceIndex(backend, commits, epoch);
    await commits.submit({ mutations: [{ puts: [fileCell(A)] }] });
    expect(await index.verify()).toBeUndefined();
    expect(await index.verify()).toEqual([]);
    // A successor takes the store over and writes what this manager never sees.
    const successor = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    successor.takeOver();
    successor.applyBatch([{ puts: [fileCell(B)] }]);
    await expect(index.verify()).rejects.toMatchObject({ code: 'NOT_MANAGER' });
    expect(index.stats.mismatches).toBe(0);

    const fenced: string[] = [];
    const gc = new GarbageCollector(
      backend,
      commits,
      new MemoryObjectStore(),
      { graceMs: 1_000, intervalMs: 60_000, sweepIntervalMs: 0, epoch },
      silentLogger(),
      (err) => fenced.push(err.code),
    );
    await gc.runCycle({ sweep: true });
    expect(fenced).toEqual(['NOT_MANAGER']);
    expect(gc.stats.indexMismatches).toBe(0);
    await gc.stop();
    index.stop();
    successor.close();
  });

  it('checks the index of activity against the store on its own, and logs what differed', async () => {
    const commits = new CommitQueue(new InlineWriter(meta), () => true, silentLogger());
    const index = new FollowedIndex(new SqliteBackend(meta), commits, () => new ActivityTable(), { epoch });
    const lines: { msg: string; differences?: string[] }[] = [];
    const log = createLogger({
      name: 'test',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[0]) },
    });
    const stop = checkEvery(index, 'activity index', 20, log);
    const loc = JSON.stringify({ server: 'ts-a', session: '00000000000000a1' });
    await commits.submit({ mutations: [{ puts: [{ row: ROW, col: 'loc', value: loc }] }] });
    await expect
      .poll(() => lines.filter((l) => l.msg === 'activity index checked against the store').length)
      .toBeGreaterThan(0);
    // What a bug would do: a reservation the commit queue never saw.
    meta.applyBatch([{ puts: [{ row: ROW, col: 'ecomp:E1', value: '{}' }] }]);
    await expect
      .poll(() => lines.find((l) => l.msg.startsWith('the activity index differed from the metadata store')))
      .toBeDefined();
    stop();
    expect(index.stats.mismatches).toBe(1);
    expect((await index.current()).busy.has(ROW)).toBe(true);
    index.stop();
  });

  it('is not checked while a committed batch is still unanswered, and finds no difference then', async () => {
    // The writer thread commits a batch before its answer reaches the manager: a snapshot taken in that
    // gap holds a batch the kept table has not heard of. Here the gap is held open.
    let answer: (() => void) | undefined;
    const inline = new InlineWriter(meta);
    const late: BatchWriter = {
      takeOver: () => inline.takeOver(),
      close: () => inline.close(),
      apply: async (mutations) => {
        const results = await inline.apply(mutations);
        await new Promise<void>((r) => (answer = r));
        return results;
      },
    };
    const commits = new CommitQueue(late, () => true, silentLogger());
    const index = new FollowedIndex(new SqliteBackend(meta), commits, () => new ActivityTable(), { epoch });
    const loc = JSON.stringify({ server: 'ts-a', session: '00000000000000a1' });
    const first = commits.submit({ mutations: [{ puts: [{ row: ROW, col: 'loc', value: loc }] }] });
    await expect.poll(() => answer).toBeDefined();
    answer!();
    await first;
    await index.current();

    answer = undefined;
    const file = commits.submit({ mutations: [{ puts: [fileCell(A)] }] });
    await expect.poll(() => answer).toBeDefined();
    expect(meta.get(ROW, `file:${A}`)).toBeDefined(); // committed, not yet answered
    let checked: string[] | undefined;
    const check = index.verify().then((d) => (checked = d));
    // A batch submitted meanwhile waits for the snapshot, then commits.
    const held = commits.submit({ mutations: [{ puts: [{ row: ROW, col: 'ecomp:E1', value: '{}' }] }] });
    await new Promise((r) => setTimeout(r, 50));
    expect(checked).toBeUndefined();
    const waiting = answer!;
    answer = undefined;
    waiting();
    await file;
    await check;
    expect(checked).toEqual([]);
    await expect.poll(() => answer).toBeDefined();
    answer!();
    await held;
    const table = await index.current();
    expect(table.busy.has(ROW)).toBe(true);
    expect(table.hosts.get('ts-a')).toEqual({ tablets: 1, bytes: 1 });
    expect(await index.verify()).toEqual([]);
    expect(index.stats.mismatches).toBe(0);
    index.stop();
  });

  it('stays equal to the store while batches land during its builds and checks', async () => {
    // The manager's own setup: batches applied by the writer thread, read on the manager's connection.
    const path = `${dir.path}/worker.sqlite`;
    const writer = new WorkerWriter(path, COMPILED_WORKER);
    await writer.takeOver();
    const reader = SqliteBackend.open({ path });
    const commits = new CommitQueue(writer, () => true, silentLogger());
    const index = new ReferenceIndex(reader, commits);
    await index.current();
    const row = (i: number) => tabletRow('0001', Buffer.from(`r${i % 7}`));
    const cell = (i: number) => ({
      row: row(i),
      col: `file:tables/0001/F${i}.rf`,
      value: '{"size":1,"entries":1}',
    });
    let writing = true;
    const writes = Array.from({ length: 4 }, async (_, w) => {
      for (let i = w; writing; i += 4) {
        await commits.submit({
          mutations: [
            i % 5 === 4
              ? { deleteRows: [row(i)] }
              : { puts: [cell(i)], deletes: [{ row: row(i), col: `file:tables/0001/F${i - 7}.rf` }] },
          ],
        });
      }
    });
    const checks: (string[] | undefined)[] = [];
    for (let i = 0; i < 150; i++) checks.push(await index.verify());
    writing = false;
    await Promise.all(writes);
    checks.push(await index.verify());
    expect(checks.filter((c) => c !== undefined && c.length > 0)).toEqual([]);
    expect(index.stats.mismatches).toBe(0);
    index.stop();
    await writer.close();
    await reader.close();
  });
});
