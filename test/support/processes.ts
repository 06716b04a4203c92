/**
 * Processes for a test suite: a {@link ProcessGroup} whose processes are killed after each test and whose
 * logs are printed when a test fails.
 *
 *   const procs = useProcesses();                  // in a describe block
 *   const p = await procs.start('manager', ['manager'], { env });
 */
import { afterAll, afterEach, beforeEach, onTestFailed } from 'vitest';
import { ProcessGroup } from './process-group.js';

export * from './process-group.js';

/**
 * A process group for the enclosing suite: processes are killed after each test, and their logs are
 * printed when the test fails.
 */
export function useProcesses(): ProcessGroup {
  const group = new ProcessGroup();
  beforeEach(() => {
    group.procs.length = 0; // the previous test's processes are stopped; keep only this test's for the dump
    onTestFailed(() => {
      if (group.procs.length > 0) process.stderr.write(`\n${group.dump()}\n`);
    });
  });
  afterEach(async () => {
    await group.stopAll();
  });
  afterAll(() => group.cleanup());
  return group;
}
