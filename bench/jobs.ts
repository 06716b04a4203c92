/**
 * Jobs for the latency benchmarks: ingest that queues a compaction in one tablet, and the moment a
 * compactor process logs that it started one there.
 */
import type { ExcClient } from '../src/client/client.js';
import type { ManagedProcess } from '../test/support/process-group.js';

/**
 * Three batches into the tablet holding rows that start with `prefix`: the third one queues a job of
 * about 60 KB. Resolves with when the third was sent (the job is queued from then on).
 *
 * The table must compact at {@link JOB_RATIO}: three files of about the same size clear it and two never
 * do. At the default ratio of 3 they clear it only when all three are exactly the same size, and a byte
 * more or less after compression (it depends on the rows) leaves the job unqueued.
 */
export const JOB_RATIO = 2.5;

export async function queueJob(client: ExcClient, table: string, prefix: string): Promise<number> {
  const batch = (i: number) =>
    Array.from({ length: 100 }, (_, j) => ({
      row: `${prefix}-${i}-${j}`,
      ts: 1_000 + i,
      value: 'x'.repeat(180),
    }));
  await client.ingest(table, batch(0));
  await client.ingest(table, batch(1));
  const queuedFrom = Date.now();
  await client.ingest(table, batch(2));
  return queuedFrom;
}

/** When `compactor` logged that it started a compaction of `tablet` (its own log's time). */
export function compactionStarted(
  compactor: ManagedProcess,
  tablet: string,
  timeoutMs = 30_000,
): Promise<number> {
  return compactor
    .waitForLog((l) => l.msg === 'compaction started' && l.tablet === tablet, timeoutMs)
    .then((l) => Date.parse(l.time as string));
}
