/**
 * `npm run test:compose`: builds the images (from Debian's mirror and npm alone, cached by content hash),
 * starts a Docker daemon when none is running, runs the shipped docker-compose.yml with
 * docker-compose.host.yml through the scenario of scenario.ts — as shipped, then with the `postgres`
 * profile holding the metadata — and leaves nothing behind: `down -v`, and
 * the daemon stopped when the test started it — on success, failure or Ctrl-C.
 *
 *   npm run test:compose                            # build what is missing, run the scenario
 *   npm run test:compose -- --skip-if-unavailable   # CI: exit 0 saying why, when Docker cannot run here
 *   npm run test:compose -- --full-build            # the project image from the repository's Dockerfile
 *   npm run test:compose -- --build-only
 *   npm run test:compose -- --keep                  # leave the cluster up (when the daemon was running)
 *   npm run test:compose -- --only-sqlite            # one of the two runs (also --only-postgres)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { composeCommand, ensureDaemon, ensureTools, type Daemon } from './docker.js';
import { buildImages } from './images.js';
import { Cluster } from './cluster.js';
import { runScenario } from './scenario.js';
import { ComposeTestError, say, setLogFile } from './run.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const flags = new Set(process.argv.slice(2));
for (const flag of flags)
  if (
    ![
      '--skip-if-unavailable',
      '--full-build',
      '--build-only',
      '--keep',
      '--only-sqlite',
      '--only-postgres',
    ].includes(flag)
  ) {
    process.stderr.write(`unknown option ${flag}\n`);
    process.exit(1);
  }

const dir = mkdtempSync(join(tmpdir(), 'excompact-compose-'));
const logPath = join(dir, 'test.log');
setLogFile(logPath);

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function main(): Promise<number> {
  const t0 = Date.now();
  let daemon: Daemon | undefined;
  let cluster: Cluster | undefined;
  let interrupted = false;
  const cleanup = async () => {
    // Each step on its own: a failed `down` must not keep the daemon we started running.
    if (cluster && !flags.has('--keep'))
      await cluster.down().catch((e: Error) => say(`cleanup: ${e.message}`));
    if (daemon) await daemon.stop().catch((e: Error) => say(`cleanup: ${e.message}`));
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    say(`${signal}: cleaning up`);
    void cleanup().then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await ensureTools();
    daemon = await ensureDaemon(join(dir, 'dockerd.log'));
    const compose = await composeCommand();
    const images = await buildImages(root, flags.has('--full-build'));
    const built = Date.now();
    say(`images ready in ${seconds(built - t0)}: ${Object.values(images).join(', ')}`);
    if (flags.has('--build-only')) return 0;
    // Once as shipped (SQLite on the managers' shared volume), once with the `postgres` profile.
    const took: string[] = [];
    const runs = (['sqlite', 'postgres'] as const).filter(
      (m) => !flags.has(`--only-${m === 'sqlite' ? 'postgres' : 'sqlite'}`),
    );
    for (const metadata of runs) {
      const start = Date.now();
      say(`--- the scenario with the metadata on ${metadata} ---`);
      cluster = new Cluster(root, compose, images, metadata);
      await runScenario(cluster);
      await cluster.down();
      await cluster.assertNothingLeft();
      cluster = undefined;
      took.push(`${metadata} ${seconds(Date.now() - start)}`);
    }
    const done = Date.now();
    say(`PASS in ${seconds(done - t0)} (images ${seconds(built - t0)}, scenarios ${took.join(', ')})`);
    return 0;
  } catch (err) {
    if (err instanceof ComposeTestError && err.code === 'UNAVAILABLE' && flags.has('--skip-if-unavailable')) {
      say(`SKIPPED: ${err.message}`);
      return 0;
    }
    say(`FAIL: ${err instanceof Error ? err.message : String(err)}`);
    if (cluster) await cluster.dumpLogs().catch(() => undefined);
    say(`every command and its output: ${logPath}`);
    return 1;
  } finally {
    await cleanup();
  }
}

// Exit at once: everything is cleaned up by now, and some handle left open (not pinned down) held the
// process for 30–60 s after its result was printed.
const code = await main();
// The log is for a failure (and for EXC_KEEP_TMP=1, as in the rest of the suite).
if (code === 0 && process.env.EXC_KEEP_TMP !== '1') rmSync(dir, { recursive: true, force: true });
process.exit(code);
