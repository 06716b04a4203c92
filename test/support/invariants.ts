/**
 * The invariants of DESIGN.md checked against a running cluster:
 *   - the data scan equals the model of everything written (invariant 1);
 *   - no reservation names a dead compactor (2);
 *   - every `~cq` entry stands for work its tablet has for that queue, and every hosted tablet with work
 *     for an existing queue has its entry (5);
 *   - after garbage collection no unreferenced file remains, and every referenced file exists (4).
 *
 * {@link checkInvariants} checks them all once a scenario is over. Invariants 2 and 5 can also be checked
 * while compactions run ({@link checkNoDeadReservations}, {@link checkQueueEntriesHaveWork}): that is when
 * they have something to check.
 */
import { expect } from 'vitest';
import type { ExcClient } from '../../src/client/client.js';
import type { MetaClient } from '../../src/meta/client.js';
import { parseQueueRow, queueEntryTablet } from '../../src/meta/keys.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { checkpointParts, type TabletMeta } from '../../src/meta/tablet.js';
import type { TableInfo } from '../../src/meta/views.js';
import { listQueues } from '../../src/queue/registry.js';
import { tabletDemand } from '../../src/queue/tablet-plan.js';
import type { ObjectStore } from '../../src/storage/index.js';
import type { TestCluster } from './cluster.js';
import { allTablets } from './meta-rows.js';
import type { DataModel } from './model.js';
import { scanLines } from './model.js';
import { waitFor } from './waits.js';

/**
 * Reads the cluster repeatedly until `problems` finds none. A problem that is seen in every read for
 * `graceMs` fails the test: while the cluster is busy, one read can catch a change half-seen (a tablet
 * read before, its queue entries after a commit), but such a problem is gone by the next read.
 * Resolves with the number of things the last read checked.
 */
async function untilNoStandingProblem(
  what: string,
  problems: () => Promise<{ checked: number; problems: string[] }>,
  graceMs: number,
): Promise<number> {
  const firstSeen = new Map<string, number>();
  const deadline = Date.now() + graceMs + 30_000; // problems that keep changing never settle either
  for (;;) {
    const now = Date.now();
    const read = await problems();
    if (read.problems.length === 0) return read.checked;
    for (const p of [...firstSeen.keys()]) if (!read.problems.includes(p)) firstSeen.delete(p);
    for (const p of read.problems) if (!firstSeen.has(p)) firstSeen.set(p, now);
    const standing = [...firstSeen].filter(([, at]) => now - at >= graceMs).map(([p]) => p);
    if (standing.length > 0 || now > deadline) {
      expect(standing.length > 0 ? standing : read.problems, what).toEqual([]);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Invariant 2: no reservation names a compactor whose node is gone — for longer than it takes its tablet
 * server to notice (the session timeout, plus `marginMs`). Resolves with the number of reservations that
 * exist at the end; a caller checking mid-scenario expects some.
 */
export async function checkNoDeadReservations(
  cluster: TestCluster,
  meta: MetaClient,
  options: { marginMs?: number } = {},
): Promise<number> {
  const session = await cluster.session();
  return untilNoStandingProblem(
    'reservations of compactors whose node is gone',
    async () => {
      const problems: string[] = [];
      let checked = 0;
      for (const t of await allTablets(meta)) {
        for (const [ecid, r] of t.reservations) {
          checked++;
          if (!(await session.exists(r.compactor))) problems.push(`${t.row} ${ecid} of ${r.compactor}`);
        }
      }
      return { checked, problems };
    },
    cluster.sessionTimeoutMs + (options.marginMs ?? 3_000),
  );
}

/**
 * Invariant 5: every `~cq` entry names a tablet that has work for that queue, and every hosted tablet
 * with work for an existing queue has its entry. A mismatch must not outlast `graceMs` (default 5 s).
 * Resolves with the number of entries that exist at the end.
 */
export async function checkQueueEntriesHaveWork(
  cluster: TestCluster,
  meta: MetaClient,
  options: { graceMs?: number } = {},
): Promise<number> {
  const session = await cluster.session();
  return untilNoStandingProblem(
    'queue entries that disagree with their tablets',
    async () => {
      const tablets = await allTablets(meta);
      const queues = await listQueues(session, cluster.layout);
      const { tables } = await meta.call<{ tables: TableInfo[] }>('GET', '/v1/tables');
      const configs = new Map(tables.map((t) => [t.id, tableConfigSchema.parse(t.config)]));
      // What each tablet wants, by the same function the tablet servers plan with.
      const demandOf = (t: TabletMeta): Map<string, number> => {
        const config = configs.get(t.tableId);
        return config ? tabletDemand(t, config, queues) : new Map<string, number>();
      };
      const byRow = new Map(tablets.map((t) => [t.row, t]));
      const entries: string[] = [];
      for await (const c of meta.scanAll({ prefix: '~cq:' })) entries.push(c.row);
      const problems: string[] = [];
      for (const row of entries) {
        const e = parseQueueRow(row);
        const t = byRow.get(queueEntryTablet(e));
        if (!t) problems.push(`entry ${row} names a tablet that does not exist`);
        else if (t.loc && !demandOf(t).has(e.queueId)) {
          // (An unhosted tablet's entries are rewritten by its next host.)
          problems.push(`entry ${row}: tablet ${t.row} has no work for queue ${e.queueId}`);
        }
      }
      for (const t of tablets) {
        if (!t.loc) continue;
        for (const queueId of demandOf(t).keys()) {
          const has = entries.some((row) => {
            const e = parseQueueRow(row);
            return e.queueId === queueId && queueEntryTablet(e) === t.row;
          });
          if (!has) problems.push(`tablet ${t.row} has work but no entry in queue ${queueId}`);
        }
      }
      return { checked: entries.length, problems };
    },
    options.graceMs ?? 5_000,
  );
}

/** Every invariant, once a scenario is over. */
export async function checkInvariants(
  cluster: TestCluster,
  options: { meta: MetaClient; client: ExcClient; store: ObjectStore; models: Record<string, DataModel> },
): Promise<void> {
  const { meta, client, store } = options;

  // 1. Exact data.
  for (const [table, model] of Object.entries(options.models)) {
    expect(await scanLines(client, table), `scan of ${table}`).toEqual(model.expected());
  }

  // 2. Reservations name live compactors only.
  await checkNoDeadReservations(cluster, meta);

  // 5. Queue entries agree with what each tablet wants.
  await checkQueueEntriesHaveWork(cluster, meta);

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
        // Checkpoint parts, and the outputs of sub-jobs waiting for the rest of their split.
        for (const f of checkpointParts(t)) referenced.add(f);
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
