/**
 * The metrics operators scale and watch by, as the real processes export them, and the deploy/ files
 * (Grafana dashboard, Kubernetes manifests) checked against them: every metric a dashboard panel or an
 * autoscaler names must be one some process exports, or the panel is empty and the autoscaler never acts.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createQueue } from '../../src/queue/registry.js';
import { useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const DEPLOY = join(import.meta.dirname, '..', '..', 'deploy');

/** The metrics: what the README table documents and deploy/ relies on. */
const REQUIRED = [
  'excompact_queue_jobs',
  'excompact_queue_bytes',
  'excompact_compactions_total',
  'excompact_compaction_seconds',
  'excompact_compaction_input_bytes',
  'excompact_reclaim_seconds',
  'excompact_pickup_seconds',
  'excompact_queue_oldest_seconds',
  'excompact_queue_compactors',
  'excompact_table_route_unserved',
  'excompact_compactor_entries_read_total',
  'excompact_compactor_entries_written_total',
  'excompact_rpc_seconds',
  'excompact_zk_session_state',
];

interface Scrape {
  text: string;
  /** Metric names, histograms with their `_bucket`, `_sum` and `_count` series. */
  names: Set<string>;
}

async function scrape(url: string): Promise<Scrape> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name = '', type] = m;
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
  }
  return { text, names };
}

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
      return Number(line.split(' ').pop());
  }
  return undefined;
}

/** Every `excompact_…` name in the deploy/ files, with the file it is in. */
function namedInDeploy(): Map<string, string> {
  const named = new Map<string, string>();
  const files = [
    ...readdirSync(join(DEPLOY, 'grafana')).map((f) => join('grafana', f)),
    ...readdirSync(join(DEPLOY, 'kubernetes')).map((f) => join('kubernetes', f)),
  ];
  for (const file of files) {
    const text = readFileSync(join(DEPLOY, file), 'utf8');
    // Parsed, not only grepped: a file that is not valid JSON or YAML fails here.
    if (file.endsWith('.json')) JSON.parse(text);
    else for (const doc of parseAllDocuments(text)) expect(doc.errors, file).toEqual([]);
    for (const m of text.matchAll(/\bexcompact_[a-z0-9_]+/g)) named.set(m[0], file);
  }
  const readme = readFileSync(join(DEPLOY, '..', 'README.md'), 'utf8');
  const table = /<!-- metrics:start -->([\s\S]*?)<!-- metrics:end -->/.exec(readme)?.[1] ?? '';
  for (const m of table.matchAll(/\bexcompact_[a-z0-9_]+/g)) named.set(m[0], 'README.md');
  return named;
}

describe('metrics and deploy/', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('metrics - every process exports what deploy/ names, the manager reports jobs per queue', async () => {
    const c = cluster();
    const s = await c.startWithTable({ table: 't', queue: 'small', splits: ['m'] });
    await createQueue(await c.session(), c.layout, 'large', 2);
    const compactor = await c.startCompactor('small');
    const [manager, tserver] = [await c.managerUrl(), `http://${s.tserver.server}`];
    for (let b = 0; b < 6; b++) {
      await s.client.ingest(
        't',
        Array.from({ length: 40 }, (_, i) => ({
          row: `${i % 2 ? 'a' : 'z'}${i}`,
          ts: b + 1,
          value: `v${b}`,
        })),
      );
    }
    // A compaction committed: the compactor counted it, with its duration and input size.
    const done = await waitFor(async () => {
      const m = await scrape(compactor.status);
      const n = sample(m.text, 'excompact_compactions_total', { queue: 'small', outcome: 'committed' });
      return n !== undefined && n > 0 && m;
    }, 'a committed compaction in the compactor metrics');
    expect(sample(done.text, 'excompact_compaction_seconds_count', { queue: 'small' })).toBeGreaterThan(0);
    expect(sample(done.text, 'excompact_compaction_input_bytes_sum', { queue: 'small' })).toBeGreaterThan(0);
    expect(sample(done.text, 'excompact_compactions_total', { queue: 'small', outcome: 'failed' })).toBe(0);
    expect(sample(done.text, 'excompact_compactor_entries_read_total', { queue: 'small' })).toBeGreaterThan(
      0,
    );
    expect(
      sample(done.text, 'excompact_compactor_entries_written_total', { queue: 'small' }),
    ).toBeGreaterThan(0);

    // A compactor killed in the middle of a job: the tablet server times how long until its work is back.
    // The first compactor drains the queue first, and the slow one starts after the ingest, so the job it
    // is killed in is the large one (seconds at its throughput), not a leftover that ends before the kill.
    await waitFor(async () => {
      const m = (await scrape(manager)).text;
      const jobs = (state: string): number =>
        sample(m, 'excompact_queue_jobs', { queue: 'small', state }) ?? -1;
      return jobs('queued') === 0 && jobs('running') === 0;
    }, 'the small queue drained');
    await compactor.terminate();
    for (let b = 0; b < 3; b++) {
      await s.client.ingest(
        't',
        Array.from({ length: 100 }, (_, i) => ({
          row: `a${i}`,
          ts: 10 + b,
          value: randomBytes(200).toString('hex'),
        })),
      );
    }
    const slow = await c.startCompactor('small', { name: 'slow', args: ['--throughput', '50000'] });
    await waitFor(async () => {
      const m = await scrape(slow.status);
      return (sample(m.text, 'excompact_compactor_running_jobs', {}) ?? 0) > 0;
    }, 'the slow compactor to run a job');
    slow.kill();
    const reclaimed = await waitFor(async () => {
      const t = await scrape(tserver);
      return (sample(t.text, 'excompact_reclaim_seconds_count', {}) ?? 0) > 0 && t;
    }, "the killed compactor's job reclaimed");
    // Reclaimed through its link closing (200 ms grace), not the 1.5 s session timeout.
    const sum = sample(reclaimed.text, 'excompact_reclaim_seconds_sum', {})!;
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(1.5);

    // No compactor of `small` is left: the table that routes there is unserved, and says so.
    const unserved = await waitFor(async () => {
      const t = await scrape(manager);
      return sample(t.text, 'excompact_table_route_unserved', { table: 't', queue: 'small' }) === 1 && t;
    }, "the table's route to a queue without compactors");
    expect(sample(unserved.text, 'excompact_queue_compactors', { queue: 'small' })).toBe(0);
    expect(sample(unserved.text, 'excompact_queue_oldest_seconds', { queue: 'large' })).toBe(0);
    const scrapes = { manager: unserved, tserver: reclaimed, compactor: done };
    const m = scrapes.manager.text;
    // Both queues, every state, even the idle queue (an autoscaler must see it from the start).
    for (const queue of ['small', 'large'])
      for (const state of ['queued', 'running', 'parked'])
        expect(sample(m, 'excompact_queue_jobs', { queue, state }), `${queue} ${state}`).toBeTypeOf('number');
    expect(sample(m, 'excompact_queue_bytes', { queue: 'large' })).toBe(0);
    expect(sample(m, 'excompact_pickup_seconds_count', { queue: 'small' })).toBeGreaterThan(0);
    expect(sample(m, 'excompact_rpc_seconds_count', { route: 'POST /v1/queues/next' })).toBeGreaterThan(0);
    for (const [role, scraped] of Object.entries(scrapes))
      expect(sample(scraped.text, 'excompact_zk_session_state', { state: 'connected' }), role).toBe(1);

    const exported = new Set(Object.values(scrapes).flatMap((x) => [...x.names]));
    for (const name of REQUIRED) expect(exported, name).toContain(name);
    const named = namedInDeploy();
    expect([...named.values()]).toContain('README.md');
    expect(named.size).toBeGreaterThan(5);
    const missing = [...named].filter(([name]) => !exported.has(name)).map(([n, f]) => `${n} (${f})`);
    expect(missing).toEqual([]);
  });

  it('deploy - a compactor Deployment per queue, each scaled by KEDA and by the HPA alternative', () => {
    const kinds = new Map<string, string[]>();
    for (const file of readdirSync(join(DEPLOY, 'kubernetes'))) {
      for (const doc of parseAllDocuments(readFileSync(join(DEPLOY, 'kubernetes', file), 'utf8'))) {
        const o = doc.toJS() as {
          kind?: string;
          metadata?: { name?: string };
          spec?: Record<string, unknown>;
        };
        if (!o.kind) continue;
        const target = (o.spec?.scaleTargetRef as { name?: string } | undefined)?.name ?? o.metadata?.name;
        kinds.set(o.kind, [...(kinds.get(o.kind) ?? []), target ?? '']);
      }
    }
    const deployments = kinds.get('Deployment') ?? [];
    expect(deployments.sort()).toEqual(['compactor-large', 'compactor-small']);
    expect((kinds.get('ScaledObject') ?? []).sort()).toEqual(deployments);
    expect((kinds.get('HorizontalPodAutoscaler') ?? []).sort()).toEqual(deployments);
  });
});
