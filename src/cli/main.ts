#!/usr/bin/env node
/** The `excompact` command. */
import { buildProgram } from './program.js';

await buildProgram().parseAsync(process.argv);
