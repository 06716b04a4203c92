/**
 * `npm run fuzz -- --seconds N [--seed S]`: the fuzz suite (engine.ts) for as long as asked, on its own
 * ZooKeeper and cluster, printing the figures and every finding. Exits 1 when anything was found.
 */
import { parseArgs } from 'node:util';
import { startEmbeddedZooKeeper } from '../../src/zk/embedded.js';
import { ProcessGroup } from '../support/process-group.js';
import { tempDir } from '../support/tmp.js';
import { startFuzzCluster } from './cluster.js';
import { formatFigures, runFuzz } from './engine.js';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '60' }, seed: { type: 'string' } },
});
const seconds = Number(values.seconds);
const seed = values.seed === undefined ? Date.now() % 1_000_000 : Number(values.seed);
if (!Number.isFinite(seconds) || seconds <= 0 || !Number.isInteger(seed)) {
  console.error('usage: npm run fuzz -- --seconds N [--seed S]');
  process.exit(1);
}

const zkDir = tempDir('fuzz-zk');
const dir = tempDir('fuzz');
const zk = await startEmbeddedZooKeeper({
  dataDir: zkDir.path,
  tickTimeMs: 100,
  minSessionTimeoutMs: 200,
  maxSessionTimeoutMs: 20_000,
});
const procs = new ProcessGroup();
let failed = true;
try {
  console.log(`fuzzing for ${seconds} s with seed ${seed} (logs in ${procs.logDir})`);
  const cluster = await startFuzzCluster({ zkConnect: zk.connectString, procs, dir: dir.path });
  try {
    const { figures, findings } = await runFuzz(cluster, { seed, seconds, log: (l) => console.log(l) });
    console.log(`\n${formatFigures(figures)}`);
    for (const x of findings) console.log(`\n${x.kind}: ${x.what}\n  ${x.detail}`);
    failed = findings.length > 0;
  } finally {
    await cluster.close();
  }
} finally {
  await procs.stopAll();
  await zk.stop();
  zkDir.cleanup();
  dir.cleanup();
  if (!failed) procs.cleanup();
}
process.exit(failed ? 1 : 0);
