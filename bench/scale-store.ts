/**
 * bench/scale store: the metadata store through the manager.
 *
 *   npx tsx bench/scale.ts store [--seconds 5] [--clients 8] [--entries 1000000] [--meta sqlite|postgres]
 *
 * `--meta postgres` runs the manager on PostgreSQL (a local server from Debian's package, durable: fsync
 * on, as in production) instead of SQLite; the figures are the same, so the two compare.
 *
 * 1. Conditional mutations per second through the manager's HTTP API from `--clients` concurrent clients
 *    (each a real conditional mutation: "absent" condition + put, one store transaction per group
 *    commit), beside an authenticated no-op round trip (GET /v1/ping) from as many clients, same run.
 * 2. First-entry lookup in one queue bin holding `--entries` entries: p50/p99 in the store itself, and
 *    through the manager's work-finding endpoint (HTTP, what an idle compactor calls).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { formatId, queuePrefix, queueRow, tabletRow } from '../src/meta/keys.js';
import type { MetaBackend } from '../src/meta/backend.js';
import { startEmbeddedPostgres } from '../src/meta/embedded-postgres.js';
import { PostgresBackend } from '../src/meta/postgres.js';
import { SqliteBackend } from '../src/meta/sqlite-backend.js';
import { COL_LOC } from '../src/meta/tablet.js';
import { fmt, percentile, printRows, startBenchCluster, throughput } from './lib.js';

export async function runStoreBench(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: 'string', default: '5' },
      clients: { type: 'string', default: '8' },
      entries: { type: 'string', default: '1000000' },
      meta: { type: 'string', default: 'sqlite' },
    },
  });
  if (values.meta !== 'sqlite' && values.meta !== 'postgres')
    throw new Error('--meta must be sqlite or postgres');
  const seconds = Number(values.seconds);
  const clients = Number(values.clients);
  const entries = Number(values.entries);

  const pgDir = values.meta === 'postgres' ? mkdtempSync(join(tmpdir(), 'exc-bench-pg-')) : undefined;
  if (pgDir) chmodSync(pgDir, 0o755); // the server runs as the postgres user
  const pg = pgDir ? await startEmbeddedPostgres({ dir: pgDir }) : undefined;
  const metaUrl = pg ? await pg.database('bench') : undefined;
  const cluster = await startBenchCluster(metaUrl ? { env: { EXC_META: metaUrl } } : {});
  /** The manager's store, opened by this process to load the queue and to read it beside the manager. */
  const openStore = async (): Promise<MetaBackend> =>
    metaUrl
      ? PostgresBackend.open({ url: metaUrl })
      : SqliteBackend.open({ path: join(cluster.env.EXC_DATA_DIR!, 'metadata.sqlite') });
  try {
    // A bin with `entries` queued entries, written straight into the manager's store before it starts;
    // the highest-priority one (added below) belongs to a hosted tablet (the work finder returns only those).
    const queueId = 'bnch';
    {
      const store = await openStore();
      const started = Date.now();
      const batch = 20_000;
      for (let i = 0; i < entries; i += batch) {
        const puts = [];
        for (let j = i; j < Math.min(entries, i + batch); j++) {
          const tableId = formatId(1 + (j % 1000));
          puts.push({
            row: queueRow({
              queueId,
              bin: 0,
              priority: j % 100_000,
              tableId,
              endRow: Buffer.from(String(j)),
            }),
            col: 'tablet',
            value: '{}',
          });
        }
        await store.applyBatch([{ puts }]);
      }
      await store.close();
      process.stdout.write(
        `loaded ${fmt(entries)} queue entries into one bin in ${fmt((Date.now() - started) / 1000, 1)} s\n`,
      );
    }

    const manager = await cluster.start('manager', ['manager'], 'manager active');
    const url = (await manager.waitForLog((l) => l.msg === 'manager listening')).url as string;
    const http = cluster.client(url);
    await cluster.start('tserver', ['tserver'], 'tablet server ready');
    const table = await cluster.meta.call<{ id: string }>('POST', '/v1/tables', { name: 'bench' });
    const hosted = tabletRow(table.id, null);
    for (;;) {
      if ((await cluster.meta.row(hosted)).has(COL_LOC)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await cluster.meta.mutate([
      {
        puts: [
          {
            row: queueRow({ queueId, bin: 0, priority: 0xfffffff, tableId: table.id, endRow: null }),
            col: 'tablet',
            value: '{}',
          },
        ],
      },
    ]);

    // 1. Conditional mutations vs no-op round trips.
    await throughput(clients, 1_000, () => http.get('/v1/ping')); // warm up connections and JIT
    const noop = await throughput(clients, seconds * 1_000, () => http.get('/v1/ping'));
    const mutations = await throughput(clients, seconds * 1_000, (loop, i) =>
      cluster.meta.mutate([
        {
          conditions: [{ op: 'absent', row: `bench:${loop}:${i}`, col: 'v' }],
          puts: [{ row: `bench:${loop}:${i}`, col: 'v', value: String(i) }],
        },
      ]),
    );
    const status = await http.get<{ commits: { batches: number; mutations: number } }>('/v1/status');

    // 2. First entry of the big bin: in the store (a second reader of the same SQLite file), and via HTTP.
    const reader = await openStore();
    const storeTimes: number[] = [];
    for (let i = 0; i < (metaUrl ? 5_000 : 20_000); i++) {
      const t = process.hrtime.bigint();
      const { cells } = await reader.scan({ prefix: queuePrefix(queueId, 0), limit: 1 });
      storeTimes.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (cells[0]?.row.endsWith(`:${table.id}:<`) !== true)
        throw new Error('the lookup did not return the highest-priority entry');
    }
    // The store's own no-op: a read of a cell that does not exist (a round trip to PostgreSQL).
    const storeNoop: number[] = [];
    for (let i = 0; i < storeTimes.length; i++) {
      const t = process.hrtime.bigint();
      await reader.get('~bench-none', 'x');
      storeNoop.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    await reader.close();
    const httpTimes: number[] = [];
    for (let i = 0; i < 3_000; i++) {
      const t = process.hrtime.bigint();
      const { work } = await http.post<{ work: { tablet: string } | null }>(
        '/v1/queues/next',
        { queueId, bins: 1, startBin: 0, waitMs: 0 },
        { idempotent: true },
      );
      httpTimes.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (work?.tablet !== hosted) throw new Error('the work finder did not return the hosted entry');
    }
    const pingTimes: number[] = [];
    for (let i = 0; i < 3_000; i++) {
      const t = process.hrtime.bigint();
      await http.get('/v1/ping');
      pingTimes.push(Number(process.hrtime.bigint() - t) / 1e6);
    }

    printRows(
      `bench/scale store — metadata on ${values.meta}, ${clients} concurrent clients, ${seconds} s per figure, ${fmt(entries)} entries in one bin`,
      [
        {
          figure: 'conditional mutations / s (HTTP, manager)',
          value: fmt(mutations.perSecond),
          baseline: `${fmt(noop.perSecond)} no-op round trips / s`,
          ratio: `${fmt(mutations.perSecond / noop.perSecond, 2)}×`,
          target: '≥ 5,000 / s',
        },
        {
          figure: 'mutations per group commit (avg)',
          value: fmt(status.commits.mutations / Math.max(1, status.commits.batches), 1),
        },
        {
          figure: 'first entry of the bin, store: p50 / p99',
          value: `${fmt(percentile(storeTimes, 50), 3)} / ${fmt(percentile(storeTimes, 99), 3)} ms`,
          baseline: `read of a missing cell: ${fmt(percentile(storeNoop, 50), 3)} / ${fmt(percentile(storeNoop, 99), 3)} ms`,
          ratio: `${fmt(percentile(storeTimes, 99) / percentile(storeNoop, 99), 2)}×`,
          target: 'p99 < 5 ms',
        },
        {
          figure: 'first entry via /v1/queues/next: p50 / p99',
          value: `${fmt(percentile(httpTimes, 50), 2)} / ${fmt(percentile(httpTimes, 99), 2)} ms`,
          baseline: `no-op: ${fmt(percentile(pingTimes, 50), 2)} / ${fmt(percentile(pingTimes, 99), 2)} ms`,
          ratio: `${fmt(percentile(httpTimes, 99) / percentile(pingTimes, 99), 2)}×`,
          target: 'p99 < 5 ms',
        },
      ],
    );
  } finally {
    await cluster.stop();
    await pg?.stop();
    if (pgDir) rmSync(pgDir, { recursive: true, force: true });
  }
}
