/**
 * A user compaction sent to a queue of its own (issue 44; Accumulo's testDispatchUser), with real
 * processes: `admin table compact --queue` runs the job on that queue's compactors whatever the table's
 * routes say, `compactions status` names the queue and the files each tablet selected, and an unknown queue is refused with nothing asked.
 */
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cliOk } from '../support/cli.js';
import { readTablet, scanLines, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';
import { COL_OUTCOME, doneRow, parseOutcome } from '../../src/meta/outcomes.js';

describe('user compactions to a queue', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('--queue sends the job to that queue; an unknown queue changes nothing', async () => {
    const c = cluster();
    // The table routes everything to `small`, which no compactor serves.
    const s = await c.startWithTable({ queue: 'small' });
    await cliOk(c, ['admin', 'queue', 'create', 'rewrites']);
    for (const ts of [1, 2])
      await s.client.ingest(
        s.table,
        Array.from({ length: 200 }, (_, i) => ({
          row: `r${String(i).padStart(3, '0')}`,
          ts,
          value: `v${ts}`,
        })),
      );
    const row = s.tablets[0]!.tablet;

    const bad = await c.cli(['admin', 'table', 'compact', s.table, '--queue', 'nope']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('no queue named "nope"');
    expect((await readTablet(s.meta, row)).userCompactions.size).toBe(0);

    const out = await cliOk(c, ['admin', 'table', 'compact', s.table, '--queue', 'rewrites']);
    const id = /compaction (\w+) requested/.exec(out)![1]!;
    // Selected at once: every file the tablet had, named in its status.
    const files = [...(await readTablet(s.meta, row)).files.keys()].sort();
    expect(files).toHaveLength(2);
    await waitFor(async () => {
      const status = await s.meta.call<{ tablets: { state: string; files?: string[] }[] }>(
        'GET',
        `/v1/user-compactions/${id}`,
      );
      return status.tablets[0]?.state === 'selected' && isDeepStrictEqual(status.tablets[0].files, files);
    }, 'the tablet to select its two files');
    expect(await cliOk(c, ['admin', 'compactions', 'status', id])).toMatch(/FILES[\s\S]*selected\s+2\s/);
    const compactor = await c.startCompactor('rewrites');
    const started = await compactor.waitForLog((l) => l.msg === 'compaction started', 30_000);
    expect(started.tablet).toBe(row);
    await waitFor(
      async () =>
        (await s.meta.call<{ done: boolean }>('GET', `/v1/tables/${s.table}/compactions/${id}`)).done,
      'the user compaction to complete',
    );
    const outcome = parseOutcome((await s.meta.row(doneRow(String(started.ecid)))).get(COL_OUTCOME) ?? '');
    expect(outcome).toMatchObject({ outcome: 'committed', kind: 'user' });
    expect((await readTablet(s.meta, row)).files.size).toBe(1);
    expect(await cliOk(c, ['admin', 'compactions', 'status', id])).toContain('queue: rewrites');
    expect(await scanLines(s.client, s.table)).toHaveLength(200);
  }, 90_000);
});
