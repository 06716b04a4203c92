/**
 * What the collector must keep, whatever lands while it reads: a real SQLite store (scanned in pages of
 * a few cells, so that one tablet's row spans several) and real object stores.
 *
 * - References are read in one snapshot: the commit of a split's last sub-job, which moves the sub-jobs'
 *   outputs from `split:` (late in the row) to `file:` (early), landing between two pages of the read,
 *   must not hide them from it.
 * - The parts and temporary files of an output a reservation is still writing are kept however old they
 *   are, named in a checkpoint or not: a merge can go on for longer than the grace period before its
 *   first checkpoint (a filter that keeps little, a range of deletes).
 */
import { utimesSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { CommitQueue } from '../../src/manager/commit-queue.js';
import { GarbageCollector } from '../../src/manager/gc.js';
import type { MetaBackend, MetaReader } from '../../src/meta/backend.js';
import { tabletRow } from '../../src/meta/keys.js';
import { SqliteBackend } from '../../src/meta/sqlite-backend.js';
import { MetaStore } from '../../src/meta/store.js';
import { parseTablet } from '../../src/meta/tablet.js';
import type { Mutation, ScanRequest } from '../../src/meta/types.js';
import { InlineWriter } from '../../src/meta/writer.js';
import { LocalObjectStore } from '../../src/storage/local.js';
import { MemoryObjectStore } from '../../src/storage/memory.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { decideCommit } from '../../src/tserver/rules.js';
import { tempDir } from '../support/index.js';

const ROW = tabletRow('0001', null);
const SETTINGS = { versions: 1, nowMs: 0, filters: [], dropDeletes: true };
const GRACE_MS = 600_000;

/** `reader` scanning `limit` cells a page, calling `between` once after its first page. */
function paged(reader: MetaReader, limit: number, between: () => Promise<void>): MetaReader {
  let first = true;
  return {
    get: (row, col) => reader.get(row, col),
    row: (row) => reader.row(row),
    scan: async (request: ScanRequest) => {
      const page = await reader.scan({ ...request, limit: Math.min(request.limit ?? 1_000, limit) });
      if (first && page.next) {
        first = false;
        await between();
      }
      return page;
    },
  };
}

/** `backend` whose reads — its own scans and those of its snapshots — come in pages of `limit` cells. */
function pagedBackend(backend: SqliteBackend, limit: number, between: () => Promise<void>): MetaBackend {
  const direct = paged(backend, limit, between);
  return Object.assign(Object.create(backend) as MetaBackend, {
    scan: (request: ScanRequest) => direct.scan(request),
    snapshot: <T>(read: (r: MetaReader) => Promise<T>) =>
      backend.snapshot((r) => read(paged(r, limit, between))),
  });
}

async function names(objects: ObjectStore): Promise<string[]> {
  const out: string[] = [];
  for await (const o of objects.list('tables/')) out.push(o.name);
  return out.sort();
}

describe('what the collector keeps', () => {
  let dir: ReturnType<typeof tempDir>;
  let store: MetaStore;
  let epoch: number;
  let commits: CommitQueue;
  beforeEach(() => {
    dir = tempDir('gc-references');
    store = new MetaStore({ path: `${dir.path}/meta.sqlite` });
    epoch = store.takeOver();
    commits = new CommitQueue(new InlineWriter(store), () => true, silentLogger());
  });
  afterEach(() => {
    store.close();
    dir.cleanup();
  });

  const submit = async (mutation: Mutation) => (await commits.submit({ mutations: [mutation] }))[0];

  it("reads references in one snapshot: a split's last commit between two pages loses no output", async () => {
    const objects = new MemoryObjectStore();
    const [a, b, o0, o1] = ['A', 'B', 'O0', 'O1'].map((n) => `tables/0001/${n}.rf`) as [
      string,
      string,
      string,
      string,
    ];
    const split = {
      inputs: [a, b],
      kind: 'system',
      allFiles: true,
      settings: SETTINGS,
      bounds: ['6d'],
      createdAt: 0,
      done: [{ output: o0, size: 1, entries: 1 }, null],
    };
    const reservation = {
      compactor: '/c/c-1',
      queueId: 'q1',
      inputs: [a, b],
      output: o1,
      kind: 'system',
      attempt: 0,
      reservedAt: 0,
      allFiles: true,
      settings: SETTINGS,
      split: { id: 'S', index: 1, of: 2, start: '6d' },
    };
    await submit({
      puts: [
        { row: ROW, col: `file:${a}`, value: JSON.stringify({ size: 1, entries: 1 }) },
        { row: ROW, col: `file:${b}`, value: JSON.stringify({ size: 1, entries: 1 }) },
        { row: ROW, col: 'ecomp:E', value: JSON.stringify(reservation) },
        { row: ROW, col: 'prev', value: 'null' },
        { row: ROW, col: 'split:S', value: JSON.stringify(split) },
      ],
    });
    // Every object is older than the grace: only the references protect them.
    for (const f of [a, b, o0, o1]) await objects.write(f, Buffer.from('x'));
    const now = Date.now();
    const meta = parseTablet(ROW, store.row(ROW));
    const commit = decideCommit(
      meta,
      meta.reservations.get('E')!,
      { tablet: ROW, ecid: 'E', compactor: '/c/c-1', output: { size: 1, entries: 1 } },
      { now, server: 'ts' },
    );
    let applied = false;
    const backend = pagedBackend(new SqliteBackend(store), 4, async () => {
      // The commit lands between the collector's first two pages of the tablet's row.
      applied = (await submit(commit))?.applied === true;
    });
    const gc = new GarbageCollector(
      backend,
      commits,
      objects,
      { graceMs: 0, intervalMs: 60_000, epoch },
      silentLogger(),
    );
    await gc.runCycle({ sweep: true });
    await gc.stop();

    expect(applied).toBe(true);
    const files = [...parseTablet(ROW, store.row(ROW)).files.keys()].sort();
    expect(files).toEqual([o0, o1]);
    // The inputs are marked for deletion by the commit (and wait for their own grace); the outputs stay.
    expect(await names(objects)).toEqual(expect.arrayContaining([o0, o1]));
  });

  it("keeps the parts and temporary files of an output being written, however old; not a dead one's", async () => {
    const objects = new LocalObjectStore(`${dir.path}/objects`);
    const live = 'tables/0001/Clive.rf';
    const dead = 'tables/0001/Cdead.rf';
    await submit({
      puts: [
        {
          row: ROW,
          col: 'ecomp:E',
          value: JSON.stringify({
            compactor: '/c/c-1',
            queueId: 'q1',
            inputs: ['tables/0001/A.rf'],
            output: live,
            kind: 'system',
            attempt: 0,
            reservedAt: 0,
            allFiles: true,
            settings: SETTINGS,
          }),
        },
      ],
    });
    // A checkpointed output that has appended nothing yet, one S3-style part nothing names yet, and a
    // plain write's temporary file: all of the live reservation's output. The same of an output no
    // reservation writes any more (its compactor died, the reservation was cancelled).
    const writing = await objects.openAppendable(`${live}.partial`);
    await objects.write(`${live}.part00001`, Buffer.from('part'));
    await objects.openAppendable(`${dead}.partial`).then((w) => w.close());
    await objects.write(`${dead}.part00001`, Buffer.from('part'));
    const plain = (name: string) => {
      let release = (): void => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      const done = objects.write(
        name,
        (async function* () {
          yield Buffer.from('first ');
          await held;
          yield Buffer.from('last');
        })(),
      );
      return { release, done };
    };
    const plainLive = plain(live.replace('Clive', 'Clive2'));
    const plainDead = plain(dead.replace('Cdead', 'Cdead2'));
    await submit({
      puts: [
        {
          row: ROW,
          col: 'ecomp:F',
          value: store.row(ROW).get('ecomp:E')!.replace(live, live.replace('Clive', 'Clive2')),
        },
      ],
    });
    const old = (Date.now() - 2 * GRACE_MS) / 1000;
    for (const n of [`${live}.partial`, `${live}.part00001`, `${dead}.partial`, `${dead}.part00001`]) {
      utimesSync(objects.pathOf(n), old, old);
    }
    const temporaries = [];
    for await (const t of objects.listTemporaries('tables/')) temporaries.push(t);
    expect(temporaries).toHaveLength(2);
    for (const t of temporaries) utimesSync(`${dir.path}/objects/${t.id}`, old, old);
    const gc = new GarbageCollector(
      new SqliteBackend(store),
      commits,
      objects,
      { graceMs: GRACE_MS, intervalMs: 60_000, epoch },
      silentLogger(),
    );
    await gc.runCycle({ sweep: true });
    await gc.stop();

    expect(await names(objects)).toEqual([`${live}.part00001`, `${live}.partial`]);
    const left = [];
    for await (const t of objects.listTemporaries('tables/')) left.push(t.target);
    expect(left).toEqual([live.replace('Clive', 'Clive2')]);
    // The writers go on and finish as if nothing had happened; the dead write's file is gone.
    await writing.append([Buffer.from('output')]);
    expect(await writing.finish(live)).toBe(6);
    expect((await objects.readRange(live, 0, 6)).toString()).toBe('output');
    plainLive.release();
    expect(await plainLive.done).toEqual({ size: 10 });
    plainDead.release();
    await expect(plainDead.done).rejects.toThrow();
  });
});
