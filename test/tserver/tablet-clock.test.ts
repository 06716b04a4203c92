/**
 * The tablet's clock through the real ingest and scan path (DataPath, Hosting) against a real (in-memory)
 * SQLite metadata store; only the transport to it is a stand-in that can lose answers. A batch
 * acknowledged after another wins over it whatever the clocks say, and the stored time never goes down.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import type { MetaClient } from '../../src/meta/client.js';
import { MetaStore } from '../../src/meta/store.js';
import { tableConfigSchema, type TableConfigInput } from '../../src/meta/table-config.js';
import { COL_TIME, locationValue, parseTablet } from '../../src/meta/tablet.js';
import type { Mutation } from '../../src/meta/types.js';
import type { QueueResolver } from '../../src/queue/resolver.js';
import { MemoryObjectStore } from '../../src/storage/memory.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { compactFiles } from '../../src/storage/compaction.js';
import type { CompactorWatch } from '../../src/tserver/compactor-watch.js';
import { DataPath } from '../../src/tserver/data.js';
import { HostedTablet } from '../../src/tserver/hosted-tablet.js';
import { Hosting } from '../../src/tserver/hosting.js';
import { Reservations } from '../../src/tserver/reservations.js';
import type { TableConfigs } from '../../src/tserver/table-configs.js';
import { ZkLayout } from '../../src/zk/layout.js';

const me = { server: 'ts:1', session: '00000000000000aa' };
const row = '0001<';
const queue = { name: 'q', id: 'abcd', bins: 4 };
const b64 = (s: string) => Buffer.from(s).toString('base64');
const put = (v: string) => ({ row: b64('r'), cf: b64('f'), cq: b64('q'), value: b64(v), delete: false });
const del = () => ({ ...put(''), delete: true });
const layout = new ZkLayout('/excompact');

/** A tablet hosted here, its row starting with `time` when given; `lose()` loses the next answer. */
async function world(time?: number, table: TableConfigInput = {}) {
  const store = new MetaStore({ path: ':memory:' });
  store.mutate({
    puts: [
      { row, col: 'prev', value: 'null' },
      { row, col: 'future', value: locationValue(me) },
      ...(time === undefined ? [] : [{ row, col: COL_TIME, value: String(time) }]),
    ],
  });
  let loseNext = false;
  let readsDown = false;
  const meta = {
    row: async (r: string) => {
      if (readsDown) throw new ExcError('UNAVAILABLE', 'the metadata store is unreachable');
      return store.row(r);
    },
    mutate: async (ms: Mutation[]) => {
      const res = store.applyBatch(ms);
      if (loseNext) {
        // Applied, the answer lost, and reading the tablet back fails too: the copy stays stale.
        loseNext = false;
        readsDown = true;
        throw new ExcError('TIMEOUT', 'answer lost', { details: { sent: true } });
      }
      return res;
    },
  } as unknown as MetaClient;
  const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }], ...table });
  const configs = {
    get: async () => ({ id: '0001', name: 't', state: 'online' as const, config }),
  } as unknown as TableConfigs;
  const watch = {
    knownAlive: () => true,
    checkAndWatch: async () => true,
    add() {},
    remove() {},
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
    resyncForMs: 50,
  });
  await hosting.load(row);
  const objects = new MemoryObjectStore();
  const reservations = new Reservations({
    hosting,
    watch,
    configs,
    layout,
    queueIdOf: (n) => (n === 'q' ? queue.id : undefined),
    queueExists: async () => true,
    outputSize: async (name) => (await objects.stat(name))?.size ?? null,
    log: silentLogger(),
  });
  /** Reserves the tablet's job for queue q, compacts it as a compactor would and commits it. */
  const compact = async () => {
    const compactor = `${layout.queueNode(queue.id)}/c-0000000001`;
    const job = await reservations.reserve({ tablet: row, queueId: queue.id, compactor });
    if (!job) throw new Error('no job for queue q');
    const result = await compactFiles({
      store: objects,
      inputs: job.inputs.map((i) => i.name),
      output: job.output,
      settings: job.settings,
    });
    await reservations.commit({ tablet: row, ecid: job.ecid, compactor, output: result.output });
    return job;
  };
  return {
    store,
    hosting,
    configs,
    objects,
    compact,
    lose: () => (loseNext = true),
    readsBack: () => (readsDown = false),
    storedTime: () => parseTablet(row, store.row(row)).time,
  };
}

async function scanValues(data: DataPath): Promise<string[]> {
  const { entries } = await data.scan({ tablet: row });
  return entries.map((e) => Buffer.from(e.value ?? '', 'base64').toString());
}

/** `objects` whose first write waits until `release()`. */
function holdFirstWrite(objects: ObjectStore) {
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => (release = r));
  let first = true;
  const store: ObjectStore = Object.assign(Object.create(objects) as ObjectStore, {
    write: async (...args: Parameters<ObjectStore['write']>) => {
      if (first) {
        first = false;
        await gate;
      }
      return objects.write(...args);
    },
  });
  return { store, release: () => release() };
}

describe('tablet clock', () => {
  it('an overwrite acknowledged later shows, while the tablet time is ahead of this server clock', async () => {
    // The last host's clock was a minute ahead: its stamps, and so the tablet's time, are in our future.
    const w = await world(Date.now() + 60_000);
    const data = new DataPath(w.hosting, new MemoryObjectStore(), w.configs);
    await data.ingest({ tablet: row, entries: [put('v1')] });
    await data.ingest({ tablet: row, entries: [put('v2')] });
    expect(await scanValues(data)).toEqual(['v2']);
    await data.ingest({ tablet: row, entries: [{ ...put(''), delete: true }] });
    await data.ingest({ tablet: row, entries: [put('v3')] });
    expect(await scanValues(data)).toEqual(['v3']);
  });

  it('an ingest decided while the copy is stale never writes the time down', async () => {
    const w = await world();
    // P1's file write waits until released, after P2 (stamped later) was applied with its answer lost.
    const objects = new MemoryObjectStore();
    let release = (): void => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let first = true;
    const held: ObjectStore = Object.assign(Object.create(objects) as ObjectStore, {
      write: async (...args: Parameters<ObjectStore['write']>) => {
        if (first) {
          first = false;
          await gate;
        }
        return objects.write(...args);
      },
    });
    const data = new DataPath(w.hosting, held, w.configs);
    const p1 = data.ingest({ tablet: row, entries: [put('v1')] });
    await new Promise((r) => setTimeout(r, 20));
    w.lose();
    await expect(data.ingest({ tablet: row, entries: [{ ...put(''), delete: true }] })).rejects.toThrow();
    const afterDelete = w.storedTime();
    w.readsBack();
    release();
    await p1;
    expect(w.storedTime()).toBeGreaterThanOrEqual(afterDelete);
    // A new host whose clock is behind stamps after the delete: what it ingests is not hidden by it.
    const next = new HostedTablet(parseTablet(row, w.store.row(row)), {
      server: 'ts:2',
      session: '00000000000000bb',
    });
    expect(next.nextTimestamp(afterDelete - 100)).toBeGreaterThan(afterDelete);
  });

  it('a full compaction reserved while a batch stamped before a delete is being written keeps the delete', async () => {
    const w = await world(undefined, { ratio: 1 });
    const data = new DataPath(w.hosting, w.objects, w.configs);
    await data.ingest({ tablet: row, entries: [put('v0')] });
    // A (put v1) is stamped, then its file write waits; D (delete), stamped after it, is applied.
    const held = holdFirstWrite(w.objects);
    const a = new DataPath(w.hosting, held.store, w.configs).ingest({ tablet: row, entries: [put('v1')] });
    await new Promise((r) => setTimeout(r, 20));
    await data.ingest({ tablet: row, entries: [del()] });
    // A compaction of every file the tablet has now, committed before A is applied.
    const job = await w.compact();
    held.release();
    await a;
    // Without the compaction D hides A (A's stamp is below D's): the compaction must not change that.
    expect(await scanValues(data)).toEqual([]);
    expect(job.inputs).toHaveLength(2);
    expect(job.settings.dropDeletes).toBe(false);
    expect(job.keepDeletes).toBe(true);
  });

  it('a full compaction drops deletes when no batch stamped at or before the tablet time is in flight', async () => {
    const w = await world(undefined, { ratio: 1 });
    const data = new DataPath(w.hosting, w.objects, w.configs);
    await data.ingest({ tablet: row, entries: [put('v0')] });
    await data.ingest({ tablet: row, entries: [del()] });
    // A batch stamped after everything applied may be in flight: it can only come after the delete.
    const held = holdFirstWrite(w.objects);
    const a = new DataPath(w.hosting, held.store, w.configs).ingest({ tablet: row, entries: [put('v1')] });
    await new Promise((r) => setTimeout(r, 20));
    const job = await w.compact();
    expect(job.settings.dropDeletes).toBe(true);
    held.release();
    await a;
    expect(await scanValues(data)).toEqual(['v1']);
  });

  it('a put after a delete of its cell in one batch shows; what comes before the delete does not', async () => {
    const w = await world();
    const data = new DataPath(w.hosting, new MemoryObjectStore(), w.configs);
    await data.ingest({ tablet: row, entries: [put('v1')] });
    await data.ingest({ tablet: row, entries: [del(), put('v2')] });
    expect(await scanValues(data)).toEqual(['v2']);
    await data.ingest({ tablet: row, entries: [put('v3'), del(), put('v4'), put('v5')] });
    expect(await scanValues(data)).toEqual(['v5']);
    await data.ingest({ tablet: row, entries: [put('v6'), del()] });
    expect(await scanValues(data)).toEqual([]);
  });
});
