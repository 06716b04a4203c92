/**
 * Table iterators (issue 45; DESIGN.md, "Table iterators"), with real processes: counters summed by a
 * `sum` combiner through many ingest batches while system and user compactions run (a compactor killed
 * on the way) read back exactly at every scan; a value filter and an age-off hold at scan and after
 * compaction; the iterator commands list, refuse and remove.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ClientEntry } from '../../src/client/client.js';
import { cliOk } from '../support/cli.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

const DAY = 86_400_000;
const COUNTERS = ['a1', 'a2', 'g7', 'n1', 'n2', 'z9'];
const CHECKPOINTS = { EXC_CHECKPOINT_BYTES: String(16 * 1024), EXC_CHECKPOINT_MS: '500' };
/** Counters of the resume test, each beside a plain cell of a large value (data for checkpoints). */
const MANY = 5_000;
const counterRow = (i: number): string => `counter-${String(i).padStart(6, '0')}`;
/** 400 bytes that compress little (so that the job's output, and its checkpoints, grow steadily). */
const filler = (i: number, b: number): string =>
  createHash('shake256', { outputLength: 300 }).update(`${i}/${b}`).digest('base64');

describe('table iterators', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('counters sum exactly through compactions; a filter and an age-off hold at scan and after compaction', async () => {
    const c = cluster();
    const s = await c.startWithTable({ queue: 'q', splits: ['m'], config: { ratio: 1.5, maxFiles: 4 } });
    const add = (name: string, options: unknown) =>
      cliOk(c, ['admin', 'table', 'iterator', 'add', s.table, name, JSON.stringify(options)]);
    await add('counts', { type: 'sum', columns: [{ family: 'count' }] });
    await add('secrets', { type: 'dropValuePrefix', prefixes: ['secret'] });
    await add('scratch', { type: 'ageOff', families: ['tmp'], ttlMs: DAY });

    // Refused, naming what is wrong, with nothing changed.
    const bad = await c.cli([
      'admin',
      'table',
      'iterator',
      'add',
      s.table,
      'x',
      '{"type":"average","columns":[]}',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('iterators.0.type');
    const twice = await c.cli([
      'admin',
      'table',
      'iterator',
      'add',
      s.table,
      'counts',
      '{"type":"sum","columns":[{"family":"n"}]}',
    ]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('already has an iterator named counts');
    expect(await cliOk(c, ['admin', 'table', 'iterator', 'list', s.table])).toMatch(
      /counts\s+sum[\s\S]*secrets\s+dropValuePrefix[\s\S]*scratch\s+ageOff/,
    );
    // Changes made at once all land: the manager applies each to the iterators as committed.
    const unused = ['u1', 'u2', 'u3', 'u4'];
    await Promise.all(unused.map((n) => add(n, { type: 'dropFamily', families: [`${n}-family`] })));
    const listed = JSON.parse(await cliOk(c, ['admin', 'table', 'iterator', 'list', s.table, '--json'])) as {
      iterators: { name: string }[];
    };
    expect(listed.iterators.map((i) => i.name).sort()).toEqual(['counts', 'scratch', 'secrets', ...unused]);
    await Promise.all(unused.map((n) => cliOk(c, ['admin', 'table', 'iterator', 'remove', s.table, n])));
    expect(await cliOk(c, ['admin', 'table', 'iterator', 'list', s.table])).not.toContain('u1');

    const sums = new Map(COUNTERS.map((r) => [r, 0n]));
    const scanAll = async () => {
      const out = new Map<string, string>();
      for await (const e of s.client.scan(s.table))
        out.set(`${e.row.toString()}/${e.cf.toString()}`, e.value.toString());
      return out;
    };
    const checkCounters = async () => {
      const seen = await scanAll();
      for (const [row, sum] of sums) expect(seen.get(`${row}/count`)).toBe(sum.toString());
      return seen;
    };
    let compactor = await c.startCompactor('q');
    for (let batch = 0; batch < 30; batch++) {
      const entries: ClientEntry[] = COUNTERS.map((row, i) => {
        const by = BigInt(((batch * 7 + i * 13) % 11) - 3);
        sums.set(row, sums.get(row)! + by);
        return { row, cf: 'count', value: by.toString() };
      });
      entries.push({
        row: `d${batch}`,
        cf: 'data',
        value: batch % 3 === 0 ? `secret-${batch}` : `v${batch}`,
      });
      entries.push({ row: `t${batch}`, cf: 'tmp', ts: Date.now() - 2 * DAY, value: 'old' });
      await s.client.ingest(s.table, entries);
      if (batch === 10) {
        // A compactor killed on the way: its job goes back to the queue and another runs it.
        compactor.kill();
        compactor = await c.startCompactor('q');
      }
      if (batch === 20) await cliOk(c, ['admin', 'table', 'compact', s.table, '--wait']);
      if (batch % 5 === 4) await checkCounters();
    }
    const final = await checkCounters();
    // The filtered values and the aged-off family are never seen.
    expect([...final.keys()].filter((k) => k.endsWith('/tmp'))).toEqual([]);
    expect([...final.values()].filter((v) => v.startsWith('secret'))).toEqual([]);
    expect([...final.keys()].filter((k) => k.endsWith('/data'))).toHaveLength(20);

    // After a compaction of everything: one file per tablet holding one entry per counter, the same sums.
    await cliOk(c, ['admin', 'table', 'compact', s.table, '--wait']);
    const summary = JSON.parse(await cliOk(c, ['admin', 'table', 'summaries', s.table, '--json'])) as {
      files: number;
      families: [string, number][];
    };
    expect(summary.files).toBe(2);
    expect(Object.fromEntries(summary.families)).toEqual({ count: COUNTERS.length, data: 20 });
    await checkCounters();

    await cliOk(c, ['admin', 'table', 'iterator', 'remove', s.table, 'scratch']);
    expect(await cliOk(c, ['admin', 'table', 'iterator', 'list', s.table])).not.toContain('scratch');
    const missing = await c.cli(['admin', 'table', 'iterator', 'remove', s.table, 'scratch']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('has no iterator named scratch');
  }, 180_000);

  it('a combining compaction killed after a checkpoint is resumed by the next compactor, and every sum is exact', async () => {
    const c = cluster();
    const s = await c.startWithTable({
      queue: 'q',
      tserverEnv: CHECKPOINTS,
      // One job of all the files (the batches make about a dozen): it drops markers and combines.
      config: { versions: 1, maxFiles: 32 },
    });
    await cliOk(c, [
      'admin',
      'table',
      'iterator',
      'add',
      s.table,
      'sums',
      '{"type":"sum","columns":[{"family":"n"}]}',
    ]);
    // Every counter in every batch (stamped by the tablet server): the job of all the files sums them.
    const sums = new Map<string, number>();
    for (let b = 1; b <= 3; b++) {
      const entries: ClientEntry[] = Array.from({ length: MANY }, (_, i) => {
        const by = ((i * 31 + b * 17) % 1_000) - 200;
        sums.set(counterRow(i), (sums.get(counterRow(i)) ?? 0) + by);
        return { row: counterRow(i), cf: 'n', value: String(by) };
      });
      for (let i = 0; i < MANY; i++) entries.push({ row: counterRow(i), cf: 'd', value: filler(i, b) });
      await s.client.ingest(s.table, entries);
    }
    const slow = await c.startCompactor('q', {
      name: 'slow',
      args: ['--throughput', '1000000'],
      env: CHECKPOINTS,
    });
    const started = await slow.waitForLog((l) => l.msg === 'compaction started', 30_000);
    await s.tserver.waitForLog(
      (l) => l.msg === 'checkpoint recorded' && l.ecid === started.ecid && (l.bytes as number) >= 200_000,
      45_000,
    );
    expect(slow.lines.some((l) => l.msg === 'compaction committed')).toBe(false);
    slow.kill();
    const next = await c.startCompactor('q', { name: 'next', env: CHECKPOINTS });
    const resumed = await next.waitForLog((l) => l.msg === 'compaction resumed from a checkpoint', 30_000);
    await next.waitForLog((l) => l.msg === 'compaction committed' && l.ecid === resumed.ecid, 60_000);

    const seen = new Map<string, string>();
    for await (const e of s.client.scan(s.table))
      if (e.cf.toString() === 'n') seen.set(e.row.toString(), e.value.toString());
      else expect(e.value.toString()).toBe(filler(Number(e.row.toString().slice(8)), 3));
    expect(seen.size).toBe(MANY);
    const wrong = [...sums].filter(([row, sum]) => seen.get(row) !== String(sum));
    expect(wrong).toEqual([]);
    // The resumed job combined what it wrote: its file holds one entry per counter and per plain cell.
    const summary = JSON.parse(await cliOk(c, ['admin', 'table', 'summaries', s.table, '--json'])) as {
      files: number;
      families: [string, number][];
    };
    expect(summary.files).toBe(1);
    expect(Object.fromEntries(summary.families)).toEqual({ d: MANY, n: MANY });
  }, 180_000);
});
