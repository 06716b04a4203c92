#!/usr/bin/env node
/** The `excompact` command. */
// The AWS SDK warns on Node 20 that later versions will need Node 22; this project supports Node 20.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { buildProgram } = await import('./program.js');

await buildProgram().parseAsync(process.argv);
