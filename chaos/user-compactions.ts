/**
 * User compactions as the chaos run's operator asks them (workload.ts decides when and with what filter):
 * requested again until acknowledged, followed until every tablet is done, with the table's parked jobs
 * released now and then; and compactions of chosen files (`--select`), which change no entry, so the
 * model is untouched and every scan still checks that none was lost, doubled or resurrected.
 */
import { sleep } from '../src/retry.js';
import type { ChaosCluster } from './cluster.js';
import type { ChaosLog } from './report.js';
import type { Rng } from './rng.js';
import type { TableState } from './tables.js';

/** What the run's selected compactions choose: small files, files not written to lately, deletes. */
const SELECTORS = ['smaller-than:64K', 'smaller-than:1M', 'older-than:20s', 'deletes-above:0.05'];

/**
 * Asks `admin table compact <table> <flags>` until a request is acknowledged (one that may have been
 * applied without its answer does the same work again, which is harmless) and returns its id.
 */
export async function requestCompaction(
  cluster: ChaosCluster,
  log: ChaosLog,
  t: TableState,
  flags: string[],
): Promise<string> {
  for (;;) {
    try {
      const out = await cluster.cli(['admin', 'table', 'compact', t.spec.name, ...flags, '--json']);
      return (JSON.parse(out) as { id: string }).id;
    } catch (err) {
      log.event('user-compaction-retry', { table: t.spec.name, err: String(err).slice(0, 300) });
      await sleep(1_000);
    }
  }
}

/**
 * Waits until compaction `id` is done on every tablet. A job failing attempt after attempt under the
 * faults is parked, and a parked job waits for an operator: after a minute the run releases the table's
 * parked jobs every 30 s, as one would.
 */
export async function followCompaction(
  cluster: ChaosCluster,
  log: ChaosLog,
  t: TableState,
  id: string,
): Promise<void> {
  let released = Date.now() + 60_000;
  for (;;) {
    const status = await cluster.meta
      .call<{ done: boolean }>('GET', `/v1/tables/${t.spec.name}/compactions/${id}`)
      .catch(() => ({ done: false }));
    if (status.done) return;
    if (Date.now() >= released) {
      released = Date.now() + 30_000;
      const out = await cluster
        .cli(['admin', 'compactions', 'release', '--table', t.spec.name])
        .catch((err: unknown) => String(err));
      log.event('user-compaction-release', { table: t.spec.name, id, out: out.slice(0, 300) });
    }
    await sleep(500);
  }
}

/** A user compaction of the files one or two selectors choose, followed to its end. */
export async function selectedCompaction(
  cluster: ChaosCluster,
  log: ChaosLog,
  t: TableState,
  rng: Rng,
): Promise<void> {
  const select = [rng.pick(SELECTORS), ...(rng.chance(0.3) ? [rng.pick(SELECTORS)] : [])];
  const id = await requestCompaction(
    cluster,
    log,
    t,
    select.flatMap((s) => ['--select', s]),
  );
  log.event(
    'user-compaction',
    { table: t.spec.name, id, select },
    `user compaction ${id} of ${t.spec.name} (--select ${select.join(' ')})`,
  );
  await followCompaction(cluster, log, t, id);
  log.event('user-compaction-done', { table: t.spec.name, id });
}
