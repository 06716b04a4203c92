/**
 * `npm run build`, second step: bundles the compiled command line (dist/cli/main.js) into dist/bundle/,
 * for the commands an operator types (admin, ingest, scan, config, health, --help).
 *
 * Why: Node spends most of a short command's time resolving, reading and compiling modules one file at a
 * time — hundreds of them across zod, undici and node-zookeeper-client. One bundle split at the CLI's own
 * lazy imports (`--splitting`) loads the same code in a handful of files, and still loads only what a
 * command uses: an admin command measured 326 → 256 ms on an idle 2-core machine (bench/cli.ts).
 *
 * bin/excompact.js picks the bundle for those commands and the unbundled dist/ for long-running processes
 * (manager, tserver, compactor, local, monitor), which resolve files next to their own modules (a worker
 * thread's script, the S3 server of `local`) and gain nothing from starting 70 ms sooner. Packages that
 * load native code or files by path stay outside the bundle.
 */
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = `${root}dist/bundle`;

rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [`${root}dist/cli/main.js`],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3', '@aws-sdk/*', 'pino', 'pino-pretty', 'prom-client', 'express'],
  // Bundled CommonJS packages call require() for Node's built-in modules.
  banner: {
    js: "import { createRequire as __excCreateRequire } from 'node:module'; const require = __excCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
