#!/usr/bin/env node
// The `compactor <queue>` command: shorthand for `excompact compactor <queue>`.
process.argv.splice(2, 0, 'compactor');
await import('./excompact.js');
