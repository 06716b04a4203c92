/**
 * The invariants of DESIGN.md checked against a running cluster after a scenario:
 *   - the data scan equals the model of everything written (invariant 1);
 *   - no reservation names a dead compactor (2);
 *   - every `~cq` entry stands for work its tablet has for that queue, and every hosted tablet with work
 *     for an existing queue has its entry (5);
 *   - after garbage collection no unreferenced file remains, and every referenced file exists (4).
 */
import { expect } from 'vitest';
import type { ExcClient } from '../../src/client/client.js';
import type { MetaClient } from '../../src/meta/client.js';
import { parseQueueRow, queueEntryTablet } from '../../src/meta/keys.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { isParked, parseTablet, type TabletMeta } from '../../src/meta/tablet.js';
import type { TableInfo } from '../../src/meta/views.js';
import { plan, queueDemand } from '../../src/queue/planner.js';
import { listQueues } from '../../src/queue/registry.js';
import type { ObjectStore } from '../../src/storage/index.js';
import type { TestCluster } from './cluster.js';
import type { DataModel } from './model.js';
import { scanLines } from './model.js';
import { waitFor } from './waits.js';

async function allTablets(meta: MetaClient): Promise<TabletMeta[]> {
  const rows = new Map<string, Map<string, string>>();
  for await (const c of meta.scanAll({ start: '0000', end: '~' })) {
    const cols = rows.get(c.row) ?? new Map<string, string>();
    cols.set(c.col, c.value);
    rows.set(c.row, cols);
  }
  return [...rows].map(([row, cols]) => parseTablet(row, cols));
}

export async function checkInvariants(
  cluster: TestCluster,
  options: { meta: MetaClient; client: ExcClient; store: ObjectStore; models: Record<string, DataModel> },
): Promise<void> {
  const { meta, client, store } = options;
  const session = await cluster.session();

  // 1. Exact data.
  for (const [table, model] of Object.entries(options.models)) {
    expect(await scanLines(client, table), `scan of ${table}`).toEqual(model.expected());
  }

  // Let in-flight work settle: reservations end and queues drain or stay put.
  const tablets = await allTablets(meta);

  // 2. Reservations name live compactors only.
  for (const t of tablets) {
    for (const [ecid, r] of t.reservations) {
      expect(
        await session.exists(r.compactor),
        `reservation ${ecid} on ${t.row} names ${r.compactor}`,
      ).not.toBeNull();
    }
  }

  // 5. Queue entries agree with what each tablet wants.
  const queues = await listQueues(session, cluster.layout);
  const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
  const configs = new Map(tables.map((t) => [t.id, tableConfigSchema.parse(t.config)]));
  const demandOf = (t: TabletMeta): Map<string, number> => {
    const config = configs.get(t.tableId);
    if (!config) return new Map();
    const reserved = new Set([...t.reservations.values()].flatMap((r) => r.inputs));
    const parked = new Set(
      [...t.failures.values()].filter((f) => isParked(f, config.maxAttempts)).flatMap((f) => f.inputs),
    );
    const userCompactionId = [...t.userCompactions.keys()][0];
    const jobs = plan({
      files: [...t.files].map(([name, f]) => ({ name, size: f.size })),
      reserved,
      parked,
      config,
      ...(userCompactionId ? { userCompactionId } : {}),
    });
    const byName = queueDemand(jobs);
    return new Map(
      [...byName].flatMap(([name, prio]) => {
        const q = queues.find((x) => x.name === name);
        return q ? [[q.id, prio] as const] : [];
      }),
    );
  };
  const byRow = new Map(tablets.map((t) => [t.row, t]));
  const entries: string[] = [];
  for await (const c of meta.scanAll({ prefix: '~cq:' })) entries.push(c.row);
  for (const row of entries) {
    const e = parseQueueRow(row);
    const t = byRow.get(queueEntryTablet(e));
    expect(t, `entry ${row} names a tablet that exists`).toBeDefined();
    if (!t!.loc) continue; // its next host rewrites its entries
    expect(
      demandOf(t!).has(e.queueId),
      `entry ${row}: tablet ${t!.row} has work for queue ${e.queueId}`,
    ).toBe(true);
  }
  for (const t of tablets) {
    if (!t.loc) continue;
    for (const queueId of demandOf(t).keys()) {
      expect(
        entries.some((row) => {
          const e = parseQueueRow(row);
          return e.queueId === queueId && queueEntryTablet(e) === t.row;
        }),
        `tablet ${t.row} has an entry in ${queueId}`,
      ).toBe(true);
    }
  }

  // 4. After GC no unreferenced file remains (the cluster runs with a short grace period).
  const grace = Number(cluster.env().EXC_GC_GRACE_MS ?? '0');
  await new Promise((r) => setTimeout(r, grace + 100));
  await meta.call('POST', '/v1/gc/run');
  await waitFor(
    async () => {
      const referenced = new Set<string>();
      for (const t of await allTablets(meta)) {
        for (const f of t.files.keys()) referenced.add(f);
        for (const r of t.reservations.values()) [r.output, ...r.inputs].forEach((f) => referenced.add(f));
      }
      const present: string[] = [];
      for await (const o of store.list('tables/')) present.push(o.name);
      const unreferenced = present.filter((p) => !referenced.has(p));
      const missing = [...(await allTablets(meta))]
        .flatMap((t) => [...t.files.keys()])
        .filter((f) => !present.includes(f));
      expect(missing, 'referenced files that do not exist').toEqual([]);
      if (unreferenced.length > 0) {
        // Files that became garbage after the last cycle (a late cancel) need one more grace period.
        await new Promise((r) => setTimeout(r, grace + 100));
        await meta.call('POST', '/v1/gc/run');
        return false;
      }
      return true;
    },
    'no unreferenced files after garbage collection',
    30_000,
    100,
  );
}
