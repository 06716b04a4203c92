/**
 * bench/cli: how long an operator waits for each `excompact` command, against a real cluster (ZooKeeper, a
 * manager, a tablet server, a compactor), beside `node -e 0` measured in the same run.
 *
 *   npx tsx bench/cli.ts [--runs 15] [--json]
 *
 * Each command is a fresh process, as a shell runs it: wall time from spawn to exit, including loading the
 * modules, connecting to ZooKeeper, finding the manager and the call itself. Runs are interleaved (one of
 * each command per round) so that a burst of load on a noisy machine hits every command alike. The target
 * is 300 ms at the median on an idle machine; on a loaded one, read the ratio to `node -e 0`.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fmt, percentile, printRows, startBenchCluster, type Row } from './lib.js';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '15' }, json: { type: 'boolean', default: false } },
});
const runs = Number(values.runs);
// The command as installed (bin/excompact.js picks the bundle for these commands).
const CLI = fileURLToPath(new URL('../bin/excompact.js', import.meta.url));
const TARGET_MS = 300;

const cluster = await startBenchCluster();
try {
  process.stderr.write('starting a manager, a tablet server and a compactor…\n');
  await cluster.start('manager', ['manager'], 'manager active');
  await cluster.start('tserver', ['tserver'], 'tablet server ready');
  await cluster.meta.call('POST', '/v1/queues', { name: 'q', bins: 2 });
  await cluster.start('compactor', ['compactor', 'q'], 'compactor ready');
  await cluster.meta.call('POST', '/v1/tables', {
    name: 't',
    splits: ['g', 'p'],
    config: { queues: [{ queue: 'q' }] },
  });
  const input = join(cluster.dir, 'ten.ndjson');
  const lines = Array.from({ length: 10 }, (_, i) => JSON.stringify({ row: `r${i}`, value: `v${i}` }));
  writeFileSync(input, `${lines.join('\n')}\n`);

  const commands: [string, string[]][] = [
    ['node -e 0 (baseline)', []],
    ['excompact --help', ['--help']],
    ['admin queue list', ['admin', 'queue', 'list']],
    ['admin queue info q', ['admin', 'queue', 'info', 'q']],
    ['admin table list', ['admin', 'table', 'list']],
    ['admin table info t', ['admin', 'table', 'info', 't']],
    ['admin compactors list', ['admin', 'compactors', 'list']],
    ['admin compactions list', ['admin', 'compactions', 'list']],
    ['admin compactions history', ['admin', 'compactions', 'history']],
    ['ingest t (10 entries)', ['ingest', 't', input]],
    ['scan t', ['scan', 't']],
  ];
  const times = new Map<string, number[]>(commands.map(([name]) => [name, []]));
  const env = { ...process.env, ...cluster.env, EXC_LOG_LEVEL: 'warn' };
  for (let round = 0; round < runs; round++) {
    for (const [name, args] of commands) {
      const argv = args.length === 0 ? ['-e', '0'] : [CLI, ...args];
      const started = process.hrtime.bigint();
      const r = spawnSync(process.execPath, argv, { env, encoding: 'utf8' });
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (r.status !== 0) throw new Error(`${name} failed (${r.status}): ${r.stderr}`);
      times.get(name)!.push(ms);
    }
    process.stderr.write(`round ${round + 1}/${runs}\n`);
  }

  const baseline = percentile(times.get(commands[0]![0])!, 50);
  const figures: Record<string, { p50: number; p90: number; ratio: number }> = {};
  const rows: Row[] = commands.map(([name]) => {
    const t = times.get(name)!;
    const p50 = percentile(t, 50);
    const p90 = percentile(t, 90);
    figures[name] = { p50: Math.round(p50), p90: Math.round(p90), ratio: p50 / baseline };
    return {
      figure: name,
      value: `p50 ${fmt(p50)} ms, p90 ${fmt(p90)} ms`,
      baseline: `node -e 0: p50 ${fmt(baseline)} ms`,
      ratio: `${fmt(p50 / baseline, 2)}×`,
      target: name.startsWith('node') ? '' : `≤ ${TARGET_MS} ms idle`,
    };
  });
  if (values.json) process.stdout.write(`${JSON.stringify({ runs, baselineMs: baseline, figures })}\n`);
  else printRows(`excompact command latency (${runs} runs each, fresh process per run)`, rows);
} finally {
  await cluster.stop();
}
