/**
 * `excompact admin …`: queues, compactors, compactions, tables, tablet servers, the object store and the consistency
 * check — what operators type every day. Each group lives in its own module; every listing takes --json,
 * human tables otherwise.
 */
import type { Command } from 'commander';
import { registerCheck } from './admin-check.js';
import { registerCompactions, registerCompactors } from './admin-compactions.js';
import { registerQueues } from './admin-queues.js';
import { registerTables } from './admin-tables.js';
import { registerTservers } from './admin-tservers.js';
import { registerStore } from './store.js';

export function registerAdmin(program: Command): void {
  const admin = program
    .command('admin')
    .description('Administer queues, compactors, compactions and tables; check the cluster.');
  registerQueues(admin);
  registerCompactors(admin);
  registerCompactions(admin);
  registerTables(admin);
  registerTservers(admin);
  registerStore(admin);
  registerCheck(admin);
}
