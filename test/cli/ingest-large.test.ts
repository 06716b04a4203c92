/**
 * `excompact ingest` with large values against a real cluster: requests stay under the tablet servers'
 * body limit, and an entry they would refuse is refused before anything is written.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_VALUE_BYTES } from '../../src/rpc/entries.js';
import { useCluster, useProcesses, useZooKeeper, type TestCluster } from '../support/index.js';

async function ok(cluster: TestCluster, args: string[]): Promise<string> {
  const r = await cluster.cli(args);
  if (r.code !== 0) throw new Error(`excompact ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

const digest = (s: string): string => createHash('sha256').update(s).digest('hex');

describe('excompact ingest - large values', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  async function running(): Promise<TestCluster> {
    await cluster().startManager();
    await cluster().startTserver();
    await ok(cluster(), ['admin', 'table', 'create', 't']);
    return cluster();
  }

  it('ingest - 24 MiB of 1 MiB values (over the 16 MiB body limit in all) is written and scans back whole', async () => {
    const c = await running();
    const entries = Array.from({ length: 24 }, (_, i) => ({
      row: `r${String(i).padStart(2, '0')}`,
      value: String.fromCharCode(97 + (i % 26)).repeat(1 << 20),
      ts: 1_000 + i,
    }));
    const file = join(c.dataDir, 'large.ndjson');
    writeFileSync(file, entries.map((e) => JSON.stringify(e)).join('\n') + '\n');

    expect(await ok(c, ['ingest', 't', file])).toMatch(/ingested 24 entries into t/);

    const scanned = (await ok(c, ['scan', 't']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { row: string; ts: number; value: string });
    expect(scanned.map((e) => [e.row, e.ts, e.value.length, digest(e.value)])).toEqual(
      entries.map((e) => [e.row, e.ts, e.value.length, digest(e.value)]),
    );
  });

  it("ingest - a value over the tablet servers' limit is refused with its line number and nothing is written", async () => {
    const c = await running();
    // More lines than one batch holds before the bad one: found only while writing, the first batch would
    // already be in the table.
    const small = Array.from({ length: 5_001 }, (_, i) => JSON.stringify({ row: `r${i}`, value: 'v' }));
    const file = join(c.dataDir, 'oversize.ndjson');
    writeFileSync(
      file,
      [...small, JSON.stringify({ row: 'big', value: 'x'.repeat(MAX_VALUE_BYTES + 1024) })].join('\n') + '\n',
    );

    const r = await c.cli(['ingest', 't', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`line 5002: value is longer than ${MAX_VALUE_BYTES} bytes`));
    expect((await ok(c, ['scan', 't'])).trim()).toBe('');
  });
});
