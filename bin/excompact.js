#!/usr/bin/env node
// The `excompact` command: runs the compiled CLI (`npm run build` compiles src/ into dist/ and bundles it).
//
// The commands an operator types run from the bundle (dist/bundle/, scripts/bundle.mjs says why); the
// long-running processes run from dist/ unbundled. The choice is made on the arguments alone, and wrongly
// only ever towards the unbundled CLI, which runs every command: an argument that names a process command
// anywhere (a table called "manager", say) merely costs that call its speed. A bundle older than the last
// compile is not used.
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const bundle = fileURLToPath(new URL('../dist/bundle/main.js', import.meta.url));
const PROCESSES = new Set(['manager', 'tserver', 'compactor', 'local', 'monitor']);

if (!existsSync(main)) {
  console.error(
    'excompact is not built: run `npm run build` (or `npm start`) in the project directory first',
  );
  process.exit(1);
}
const bundled =
  !process.argv.slice(2).some((a) => PROCESSES.has(a)) &&
  existsSync(bundle) &&
  statSync(bundle).mtimeMs >= statSync(main).mtimeMs;
await import(bundled ? bundle : main);
