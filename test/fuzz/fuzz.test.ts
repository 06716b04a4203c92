/**
 * The fuzz suite, bounded: sixty generated requests (at most 30 s) to the RPC routes and `admin` commands
 * of a real cluster (see engine.ts for what is judged). `npm run fuzz -- --seconds N` runs it for longer.
 * EXC_FUZZ_SEED replays a seed; a failure prints the seed and each finding with its request.
 */
import { describe, expect, it } from 'vitest';
import { useProcesses, useZooKeeper } from '../support/index.js';
import { tempDir } from '../support/tmp.js';
import { startFuzzCluster } from './cluster.js';
import { formatFigures, runFuzz } from './engine.js';

const SEED = Number(process.env.EXC_FUZZ_SEED ?? 19);

describe('fuzz', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();

  it('fuzz - every route and admin command: 4xx naming what was wrong and nothing changed, or the documented effect; never a 5xx or a crash', async () => {
    const dir = tempDir('fuzz');
    const cluster = await startFuzzCluster({ zkConnect: zk().connectString, procs, dir: dir.path });
    try {
      const { figures, findings } = await runFuzz(cluster, {
        seed: SEED,
        requests: 60,
        seconds: 30,
        cliEvery: 7,
      });
      const report = `${formatFigures(figures)}\n${findings.map((x) => `${x.kind}: ${x.what}\n  ${x.detail}`).join('\n')}`;
      expect(findings, report).toEqual([]);
      expect(figures.rejected, report).toBeGreaterThan(figures.requests / 4);
      expect(figures.accepted, report).toBeGreaterThan(figures.requests / 10);
    } finally {
      await cluster.close();
      dir.cleanup();
    }
  }, 120_000);
});
