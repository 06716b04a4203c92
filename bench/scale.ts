/**
 * bench/scale: where each component stops (docs/scaling.md records the figures).
 *
 *   npx tsx bench/scale.ts store [--meta sqlite|postgres] [...]   # the metadata store (scale-store.ts)
 *   npx tsx bench/scale.ts zk [--sessions 0,1000,10000] [...]     # ZooKeeper sessions (scale-zk.ts)
 *   npx tsx bench/scale.ts tablets [--tablets 1000,10000] [...]   # idle cost by tablets (scale-tablets.ts)
 *
 * Each part's options are in its file's header.
 */
import { runStoreBench } from './scale-store.js';
import { runTabletsBench } from './scale-tablets.js';
import { runZkBench } from './scale-zk.js';

const parts: Record<string, (args: string[]) => Promise<void>> = {
  store: runStoreBench,
  zk: runZkBench,
  tablets: runTabletsBench,
};
const [part = '', ...rest] = process.argv.slice(2);
const run = parts[part];
if (!run) {
  process.stderr.write(`usage: npx tsx bench/scale.ts ${Object.keys(parts).join('|')} [options]\n`);
  process.exit(2);
}
await run(rest);
