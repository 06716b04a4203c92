/**
 * The cluster the fuzzer runs against: a manager, a tablet server and a compactor as real processes, on a
 * ZooKeeper the caller started, with the local object store. Usable from vitest (fuzz.test.ts) and from
 * `npm run fuzz` (main.ts) alike: nothing here imports vitest.
 *
 * Baseline: queue `q1` and table `t1` (split at `m`, routed to `q1`, a few rows), which the fuzzer may
 * change or delete (they are recreated between requests); and queue `qc` with the compactor, which it
 * never names, so that the compactor's exit always means a crash.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { MetaClient } from '../../src/meta/client.js';
import type { TableInfo, TabletView } from '../../src/meta/views.js';
import { createQueue, readQueueMap } from '../../src/queue/registry.js';
import { ZkLayout, ZkSession, digestAuthFromSecret, ensureLayout } from '../../src/zk/index.js';
import { runCli, type LogLine, type ManagedProcess, type ProcessGroup } from '../support/process-group.js';
import { uniqueName } from '../support/tmp.js';
import type { FuzzTarget } from './engine.js';
import type { Known } from './inputs.js';

export const COMPACTOR_QUEUE = 'qc';

export async function startFuzzCluster(options: {
  zkConnect: string;
  procs: ProcessGroup;
  dir: string;
}): Promise<FuzzTarget & { close(): Promise<void> }> {
  const secret = `fuzz-secret-${uniqueName('')}-0123456789`;
  const root = `/${uniqueName('fuzz')}`;
  const layout = new ZkLayout(root);
  mkdirSync(join(options.dir, 'store'), { recursive: true });
  const env = {
    EXC_ZK: options.zkConnect,
    EXC_ZK_ROOT: root,
    EXC_SECRET: secret,
    EXC_ZK_SESSION_TIMEOUT_MS: '4000',
    EXC_DATA_DIR: join(options.dir, 'manager'),
    EXC_STORE: `file://${join(options.dir, 'store')}`,
    EXC_PORT: '0',
    EXC_GC_INTERVAL_MS: '3600000',
    EXC_LOG_LEVEL: 'info',
  };
  const start = async (name: string, args: string[], ready: string): Promise<[ManagedProcess, LogLine]> => {
    const proc = await options.procs.start(name, args, { env, readyWhen: (l) => l.msg === ready });
    return [proc, await proc.waitForLog((l) => l.msg === ready)];
  };
  const [manager, managerReady] = await start('manager', ['manager'], 'manager active');
  const [tserver, tserverReady] = await start('tserver', ['tserver'], 'tablet server ready');
  const session = await ZkSession.connect({
    connectString: options.zkConnect,
    sessionTimeoutMs: 10_000,
    auth: digestAuthFromSecret(secret),
  });
  await ensureLayout(session, layout);
  await createQueue(session, layout, COMPACTOR_QUEUE, 2);
  const [compactor, compactorReady] = await start(
    'compactor',
    ['compactor', COMPACTOR_QUEUE, '--long-poll', '2000'],
    'compactor ready',
  );
  const meta = new MetaClient({ session, layout, secret, logger: silentLogger(), timeoutMs: 15_000 });
  const client = new ExcClient({ meta, secret, logger: silentLogger(), moveTimeoutMs: 20_000 });
  const procs = [manager, tserver, compactor];

  const ensureBaseline = async (): Promise<void> => {
    const { map } = await readQueueMap(session, layout);
    if (!map.has('q1')) await meta.call('POST', '/v1/queues', { name: 'q1', bins: 4 });
    const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
    if (!tables.some((t) => t.name === 't1')) {
      await meta.call('POST', '/v1/tables', {
        name: 't1',
        splits: ['m'],
        config: { queues: [{ queue: 'q1' }] },
      });
      for (let i = 0; i < 100; i++) {
        const tablets = await client.tablets('t1');
        if (tablets.every((t) => t.loc)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await client.ingest('t1', [
        { row: 'a', value: 'v' },
        { row: 'q', value: 'v' },
      ]);
    }
  };
  await ensureBaseline();

  return {
    secret,
    urls: {
      manager: managerReady.url as string,
      tserver: `http://${tserverReady.name as string}`,
      compactor: (compactorReady.status as string).replace(/\/v1\/status$|\/status$/, ''),
    },
    async known(): Promise<Known> {
      await ensureBaseline();
      const { map } = await readQueueMap(session, layout);
      const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
      const tablets: string[] = [];
      for (const t of tables.slice(0, 5)) {
        const shown = await meta
          .call<{ tablets: TabletView[] }>('GET', `/v1/tables/${encodeURIComponent(t.name)}`)
          .catch(() => ({ tablets: [] as TabletView[] }));
        tablets.push(...shown.tablets.map((x) => x.tablet));
      }
      const { tservers } = await meta.call<{ tservers: { session: string }[] }>('GET', '/v1/tservers');
      return {
        tables: tables.map((t) => t.name),
        queues: [...map.keys()].filter((q) => q !== COMPACTOR_QUEUE),
        tablets,
        compactors: [compactorReady.compactor as string],
        tserverSession: tservers[0]?.session ?? '0000000000000000',
      };
    },
    async snapshot(): Promise<Map<string, string>> {
      const out = new Map<string, string>();
      for await (const c of meta.scanAll({ limit: 10_000 })) out.set(`${c.row}\u0001${c.col}`, c.value);
      out.set('zk:queues', JSON.stringify([...(await readQueueMap(session, layout)).map]));
      for (const id of await session.children(layout.compactors)) {
        const children = await session.children(layout.queueNode(id)).catch(() => ['(gone)']);
        out.set(`zk:compactors/${id}`, children.sort().join(','));
      }
      return out;
    },
    quiet(snapshot: Map<string, string>): boolean {
      // Every tablet (a row with `prev`) hosted (`loc`), none on its way to a server (`future`).
      for (const key of snapshot.keys()) {
        const [row, col] = key.split('\u0001');
        if (col === 'future') return false;
        if (col === 'prev' && !snapshot.has(`${row}\u0001loc`)) return false;
      }
      return true;
    },
    dead: () => procs.filter((p) => !p.running).map((p) => p.name),
    cli: (args, input) => runCli(args, { env, timeoutMs: 60_000, ...(input === undefined ? {} : { input }) }),
    async close(): Promise<void> {
      await options.procs.stopAll();
      await session.close();
    },
  };
}
