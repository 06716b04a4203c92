/**
 * An ingest that fails part way can be finished exactly once: its tablet server is killed mid-ingest, the
 * command fails saying how much was acknowledged and printing the command that writes the rest, and that
 * command (the same input, the same --batch-id) writes every entry exactly once. On a table that keeps
 * three versions and entries with no timestamp (the tablet server stamps them), a batch applied twice would
 * show as a second version of its cells.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/process-group.js';
import { useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const ENTRIES = 60_000;

describe('ingest --batch-id', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('a tablet server killed mid-ingest: the command says how to finish, and finishing writes every entry once', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', splits: ['r2', 'r5', 'r8'], config: { versions: 3 } });
    const input = join(c.dataDir, 'input.ndjson');
    const lines = Array.from({ length: ENTRIES }, (_, i) =>
      JSON.stringify({ row: `r${String(i).padStart(6, '0')}`, value: `v${i}` }),
    );
    writeFileSync(input, `${lines.join('\n')}\n`);

    const first = runCli(['ingest', 't', input, '--batch-id', 'load-1'], {
      env: c.env(),
      timeoutMs: 120_000,
    });
    // Kill the only tablet server once some batches are in.
    await waitFor(
      async () => (await s.client.tablets('t')).some((t) => t.files.length > 0),
      'the first batches to be applied',
      60_000,
      20,
    );
    s.tserver.kill();
    const failed = await first;
    expect(failed.code).toBe(2);
    const acknowledged = /ingest stopped: (\d+) of (\d+) entries acknowledged/.exec(failed.stderr);
    expect(acknowledged, failed.stderr).not.toBeNull();
    expect(Number(acknowledged![1])).toBeLessThan(ENTRIES);
    expect(Number(acknowledged![2])).toBe(ENTRIES);
    // The command to finish skips the batches acknowledged: a tablet remembers a batch only 15 minutes
    // after applying it, and a long ingest's first batches may be older than that (found by a review).
    const batches = /\((\d+) batches\)/.exec(failed.stderr)![1]!;
    const finish = `excompact ingest t ${input} --batch-id load-1 --skip-batches ${batches}`;
    expect(failed.stderr).toContain(finish);

    await c.startTserver({ name: 'tserver-2' });
    const second = await runCli(finish.split(' ').slice(1), { env: c.env(), timeoutMs: 120_000 });
    expect(second.code, second.stderr).toBe(0);
    const done =
      /ingested (\d+) entries into t \(batch id load-1(?:; (\d+) in the first (\d+) batches were not sent again)?(?:; (\d+) were already written)?/.exec(
        second.stdout,
      );
    expect(done, second.stdout).not.toBeNull();
    const [written, notSent, repeated] = [done![1], done![2], done![4]].map((n) => Number(n ?? 0));
    expect(notSent).toBe(Number(acknowledged![1])); // every acknowledged entry skipped
    expect(written! + notSent!).toBe(ENTRIES);
    // At most the batch in flight when the server died was applied without an answer (5,000 entries).
    expect(repeated).toBeLessThanOrEqual(5_000);

    // Every entry exactly once: one version per cell, every row there.
    const scanned = await runCli(['scan', 't'], { env: c.env(), timeoutMs: 120_000 });
    expect(scanned.code, scanned.stderr).toBe(0);
    const rows = scanned.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { row: string }).row);
    expect(rows).toHaveLength(ENTRIES);
    expect(new Set(rows).size).toBe(ENTRIES);

    // And once more, all of it, within 15 minutes: nothing is written again.
    const third = await runCli(['ingest', 't', input, '--batch-id', 'load-1'], {
      env: c.env(),
      timeoutMs: 120_000,
    });
    expect(third.stdout).toContain('60000 were already written by an earlier attempt');
    // --skip-batches repeats an earlier ingest: without its --batch-id it is refused, nothing written.
    const alone = await runCli(['ingest', 't', input, '--skip-batches', '2'], { env: c.env() });
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain('--skip-batches finishes an earlier ingest: give its --batch-id too');
    // Four ingests and a scan of 60,000 entries through the CLI: about a minute alone on two cores.
  }, 180_000);
});
