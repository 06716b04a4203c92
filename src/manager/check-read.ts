/**
 * Reading a live cluster for the consistency check; check.ts judges what is read here. The order of the
 * reads is what keeps a busy cluster from showing problems that are not there:
 *
 *   1. Queues, from ZooKeeper.
 *   2. One read transaction of the metadata store: tablets, queue entries, deletion marks and table
 *      settings. A tablet and its `~cq` entries change in one mutation; read apart, every commit in between
 *      would show an entry without work or work without an entry. Within a tablet's row too: a row's
 *      columns may come in several pages, and a commit between two of them would show a job's inputs gone
 *      but not its output in the selection (or the reverse), a user job beside the selection it ended.
 *   3. Compactor nodes, after the metadata: a tablet server records a reservation only while its
 *      compactor's node exists, so a node named in the read and missing now is dead — and a compactor that
 *      registered after the read has no reservation in it.
 *   4. The object store, last: a file is written before it is referenced, so a file referenced in the read
 *      is listed unless it was lost; an object written after the read is unreferenced but young, never an
 *      orphan.
 *
 * What remains racy (a queue created or deleted between 1 and 2, a reservation cancelled after 2) shows
 * for a moment only; the report says so.
 */
import { ExcError } from '../errors.js';
import type { Logger } from '../log.js';
import { ALL_TABLETS, TABLE_PREFIX } from '../meta/keys.js';
import { TABLES_PREFIX } from '../meta/paths.js';
import { scanRows, type MetaBackend, type MetaReader } from '../meta/backend.js';
import { tableConfigSchema, type TableConfig } from '../meta/table-config.js';
import { parseTablet, type TabletMeta } from '../meta/tablet.js';
import { listQueues } from '../queue/registry.js';
import type { TemporaryInfo } from '../storage/object-store.js';
import { isZkCode, type ZkLayout, type ZkSession } from '../zk/index.js';
import { markProblem, readMarks } from './deletions.js';
import { checkCluster, type CheckInput, type CheckReport, type NotCheckable } from './check.js';
import type { GcObjectStore } from './gc.js';

export interface CheckSources {
  store: MetaBackend;
  session: ZkSession;
  layout: ZkLayout;
  /** Undefined when the manager runs without an object store: the file checks are not checkable. */
  objects: GcObjectStore | undefined;
  graceMs: number;
  /** How long past its grace a leftover may wait for the collector's next sweep (default 0). */
  sweepSlackMs?: number;
  log: Logger;
}

type MetadataRead = Pick<
  CheckInput,
  'tablets' | 'queueEntries' | 'deletions' | 'badMarks' | 'tableConfigs' | 'malformed'
>;

export async function runCheck(sources: CheckSources): Promise<CheckReport> {
  const queues = await listQueues(sources.session, sources.layout);
  const metadata = await sources.store.snapshot((reader) => readMetadata(reader));
  const liveCompactors = await readCompactorNodes(sources.session, sources.layout);
  const objects = await listObjects(sources.objects);
  const temporaries = await listTemporaries(sources.objects);
  const report = checkCluster({
    now: Date.now(),
    graceMs: sources.graceMs,
    sweepSlackMs: sources.sweepSlackMs ?? 0,
    ...metadata,
    queues,
    liveCompactors,
    objects,
    temporaries,
  });
  const found = Object.entries(report.problems).filter(([, list]) => list.count);
  sources.log.info(
    { ok: report.ok, problems: Object.fromEntries(found.map(([name, list]) => [name, list.count])) },
    'consistency check',
  );
  return report;
}

/** Everything the check needs of the metadata store; call inside one snapshot. */
async function readMetadata(store: MetaReader): Promise<MetadataRead> {
  const malformed = new Map<string, string>();
  const tablets: TabletMeta[] = [];
  for await (const { row, cols } of scanRows(store, { start: ALL_TABLETS.start, end: ALL_TABLETS.end })) {
    try {
      tablets.push(parseTablet(row, cols));
    } catch (err) {
      malformed.set(row, (err as Error).message);
    }
  }
  const queueEntries: string[] = [];
  for await (const r of scanRows(store, { prefix: '~cq:' })) queueEntries.push(r.row);
  const deletions = new Map<string, number>();
  const badMarks = new Map<string, string>();
  for (const [file, mark] of await readMarks(store)) {
    const problem = markProblem(file, mark);
    if (problem === null) deletions.set(file, mark.at);
    else badMarks.set(file, problem);
  }
  const tableConfigs = new Map<string, TableConfig>();
  /** Tables being created (table-create.ts): not there yet, their tablets still being written. */
  const creating = new Set<string>();
  for await (const { row, cols } of scanRows(store, { prefix: TABLE_PREFIX })) {
    if (cols.get('state') === 'creating') creating.add(row.slice(TABLE_PREFIX.length));
    const config = parseConfig(cols.get('config'));
    if (config.success) tableConfigs.set(row.slice(TABLE_PREFIX.length), config.data);
    else malformed.set(row, `config: ${config.error}`);
  }
  const visible = creating.size === 0 ? tablets : tablets.filter((t) => !creating.has(t.tableId));
  return { tablets: visible, queueEntries, deletions, badMarks, tableConfigs, malformed };
}

function parseConfig(
  text: string | undefined,
): { success: true; data: TableConfig } | { success: false; error: string } {
  try {
    const parsed = tableConfigSchema.safeParse(JSON.parse(text ?? '{}'));
    if (parsed.success) return parsed;
    return { success: false, error: parsed.error.issues[0]?.message ?? 'invalid' };
  } catch {
    return { success: false, error: 'not JSON' };
  }
}

/** The paths of every compactor node, of every queue node (those of deleted queues' leftovers too). */
async function readCompactorNodes(session: ZkSession, layout: ZkLayout): Promise<Set<string>> {
  const childrenOf = (path: string): Promise<string[]> =>
    session.children(path).catch((err: unknown) => {
      // A queue deleted while we list: its compactors are gone with it.
      if (isZkCode(err, 'ZK_NO_NODE')) return [];
      throw err;
    });
  const live = new Set<string>();
  for (const queueId of await childrenOf(layout.compactors)) {
    const node = layout.queueNode(queueId);
    for (const child of await childrenOf(node)) live.add(`${node}/${child}`);
  }
  return live;
}

const NO_STORE: NotCheckable = { notCheckable: 'this manager has no object store configured' };

async function listObjects(
  objects: GcObjectStore | undefined,
): Promise<Map<string, { size: number; modifiedMs: number }> | NotCheckable> {
  if (!objects) return NO_STORE;
  const out = new Map<string, { size: number; modifiedMs: number }>();
  for await (const o of objects.list(TABLES_PREFIX))
    out.set(o.name, { size: o.size, modifiedMs: o.modifiedMs });
  return out;
}

async function listTemporaries(objects: GcObjectStore | undefined): Promise<TemporaryInfo[] | NotCheckable> {
  if (!objects) return NO_STORE;
  if (!objects.listTemporaries) return { notCheckable: 'this object store cannot list temporaries' };
  const out: TemporaryInfo[] = [];
  try {
    for await (const t of objects.listTemporaries(TABLES_PREFIX)) out.push(t);
  } catch (err) {
    // The backend has no way to list them (s3rver): say so rather than report none.
    if (err instanceof ExcError && err.code === 'NOT_SUPPORTED') return { notCheckable: err.message };
    throw err;
  }
  return out;
}
