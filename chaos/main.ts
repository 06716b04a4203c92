/**
 * `npm run chaos -- --seconds N --seed S [--report file.json]`: the whole cluster under random, overlapping
 * faults, with an exact model of every table, and the invariants checked as it goes and at the end.
 *
 * The run: start the topology (chaos/cluster.ts) and the tables; write continuously (chaos/workload.ts);
 * inject the seed's fault schedule (chaos/faults.ts); every few seconds scan a table behind a write
 * fence, now and then run a user compaction with a filter; at quiescent points (faults drained, every
 * process up, writes paused) scan every table and run `excompact admin check`; at the end stop the
 * compactors, collect garbage, and judge the outcomes (chaos/checks.ts). The last line sums it up; the
 * exit code is 1 on any violation, with the run's directory (logs of every process, the event log, the
 * schedule) kept and printed.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { describeError } from '../src/errors.js';
import { sleep } from '../src/retry.js';
import { ChaosCluster } from './cluster.js';
import { FaultInjector } from './faults.js';
import { makeSchedule } from './schedule.js';
import { ChaosLog } from './report.js';
import { Rng } from './rng.js';
import { runChaos, type ChaosOptions } from './run.js';

const int = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
  return n;
};

// The AWS SDK warns on Node 20 that later versions will need Node 22 (see src/storage/s3.ts).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const program = new Command('chaos')
  .description('Run the cluster under random, overlapping faults and check every invariant.')
  .option('--seconds <n>', 'how long faults and writes run', int('--seconds', 10), 300)
  .option('--seed <s>', 'fixes the fault schedule and the workload', '1')
  .option('--report <file>', 'write the figures as JSON')
  .option('--rate <ops/s>', 'writes per second', int('--rate', 1), 20)
  .option('--fault-every <ms>', 'mean time between faults', int('--fault-every', 100), 2_500)
  .option('--session-ms <ms>', 'ZooKeeper session timeout of the cluster', int('--session-ms', 1_000), 4_000)
  .option('--scan-every <s>', 'seconds between fenced scans of a table', int('--scan-every', 1), 8)
  .option('--check-every <s>', 'seconds between quiescent checks (default: a third of the run, at most 600)')
  .option(
    '--min-compactions <n>',
    'fail the run when fewer compactions commit',
    int('--min-compactions', 0),
    0,
  )
  .option('--min-splits <n>', 'fail the run when fewer tablets split', int('--min-splits', 0))
  .option('--min-merges <n>', 'fail the run when fewer tablet merges are made', int('--min-merges', 0))
  .option('--min-moves <n>', 'fail the run when fewer tablets move', int('--min-moves', 0))
  .option(
    '--until-compactions <n>',
    'end the faulted phase once this many compactions committed (or after --seconds, whichever is first)',
    int('--until-compactions', 1),
  )
  .option('--no-zk-faults', 'no ZooKeeper faults (server kills, processes cut off from it)')
  .option('--meta <store>', "the managers' metadata store: sqlite or postgres (a local server)", 'sqlite')
  .option('--dir <dir>', 'run directory (default: a new temporary one, removed when the run passes)')
  .option('--keep', 'keep the run directory even when the run passes')
  .addHelpText(
    'after',
    '\nExamples:\n  npm run chaos -- --seconds 300 --seed 1\n  npm run chaos -- --seconds 36000 --seed soak --report soak.json\n',
  );
program.parse();
const flags = program.opts<{
  seconds: number;
  seed: string;
  report?: string;
  rate: number;
  faultEvery: number;
  sessionMs: number;
  checkEvery?: string;
  scanEvery: number;
  minCompactions: number;
  minSplits?: number;
  minMerges?: number;
  minMoves?: number;
  untilCompactions?: number;
  zkFaults: boolean;
  meta: string;
  dir?: string;
  keep?: boolean;
}>();

if (flags.meta !== 'sqlite' && flags.meta !== 'postgres') {
  process.stderr.write(`chaos: --meta must be sqlite or postgres, not ${flags.meta}\n`);
  process.exit(1);
}
const dir = flags.dir ? resolve(flags.dir) : mkdtempSync(join(tmpdir(), 'exc-chaos-'));
mkdirSync(dir, { recursive: true });
const log = new ChaosLog(join(dir, 'chaos.jsonl'));
const options: ChaosOptions = {
  seconds: flags.seconds,
  seed: flags.seed,
  rate: flags.rate,
  sessionTimeoutMs: flags.sessionMs,
  checkEverySeconds: flags.checkEvery
    ? Number(flags.checkEvery)
    : Math.min(600, Math.ceil(flags.seconds / 3)),
  zkFaults: flags.zkFaults,
  minCompactions: flags.minCompactions,
  ...(flags.minSplits === undefined ? {} : { minSplits: flags.minSplits }),
  ...(flags.minMerges === undefined ? {} : { minMerges: flags.minMerges }),
  ...(flags.minMoves === undefined ? {} : { minMoves: flags.minMoves }),
  scanEverySeconds: flags.scanEvery,
  ...(flags.untilCompactions ? { untilCompactions: flags.untilCompactions } : {}),
};

const rng = new Rng(flags.seed);
const schedule = makeSchedule(rng.fork('faults'), {
  durationMs: flags.seconds * 1000,
  meanIntervalMs: flags.faultEvery,
  sessionTimeoutMs: flags.sessionMs,
  zkFaults: options.zkFaults,
});
writeFileSync(join(dir, 'schedule.json'), `${JSON.stringify(schedule, null, 1)}\n`);
log.say(
  `chaos: seed ${flags.seed}, ${flags.seconds}s, ${schedule.length} faults scheduled, metadata on ${flags.meta}; run directory ${dir}`,
);

const cluster = new ChaosCluster({
  dir,
  sessionTimeoutMs: flags.sessionMs,
  gcGraceMs: 20_000,
  queues: [
    { name: 'small', bins: 4, compactors: 3 },
    // Two jobs at once on each, on a compactor's pool of threads.
    { name: 'large', bins: 2, compactors: 3, args: ['--concurrency', '2'] },
    // The `bulky` table's queue: compactors that read at most 128 KB/s, so that its jobs last seconds
    // and report progress (and checkpoints) twice a second.
    { name: 'bulk', bins: 2, compactors: 3, args: ['--throughput', '131072', '--progress-every', '500'] },
  ],
  tservers: 3,
  meta: flags.meta === 'postgres' ? 'postgres' : 'sqlite',
  log,
});
const injector = new FaultInjector(cluster, log, rng.fork('injection'), flags.sessionMs, {
  small: 4,
  large: 2,
  bulk: 2,
});

let code = 1;
try {
  const result = await runChaos(cluster, injector, schedule, rng.fork('workload'), options, log);
  if (flags.report) writeFileSync(flags.report, `${JSON.stringify(result.report, null, 2)}\n`);
  writeFileSync(join(dir, 'report.json'), `${JSON.stringify(result.report, null, 2)}\n`);
  code = result.violations > 0 ? 1 : 0;
  if (code !== 0) log.say(`chaos: violations found; logs and the event log are in ${dir}`);
  process.stdout.write(`${result.summary}\n`);
} catch (err) {
  log.say(`chaos: the run failed: ${describeError(err)}\n${err instanceof Error ? err.stack : ''}`);
  log.say(`chaos: logs in ${dir}`);
} finally {
  await cluster.stop().catch(() => undefined);
  await log.close();
  await sleep(100);
}
if (code === 0 && !flags.dir && !flags.keep) rmSync(dir, { recursive: true, force: true });
process.exit(code);
