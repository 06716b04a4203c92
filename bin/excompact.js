#!/usr/bin/env node
// The `excompact` command: runs the compiled CLI (npm run build compiles src/ into dist/).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (!existsSync(main)) {
  console.error(
    'excompact is not built: run `npm run build` (or `npm start`) in the project directory first',
  );
  process.exit(1);
}
await import(main);
