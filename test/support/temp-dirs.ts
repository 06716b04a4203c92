/**
 * Temporary directories for a test file or suite, removed together after it (or left for inspection with
 * EXC_KEEP_TMP=1). Unlike a cleanup at the end of each test, this also runs when a test fails.
 *
 *   const freshDir = useTempDirs('store');     // at file level or in a describe block
 *   const store = new LocalObjectStore(freshDir());
 */
import { afterAll } from 'vitest';
import { tempDir } from './tmp.js';

/** Returns a maker of fresh directories named `exc-<prefix>-…`; all of them go after the enclosing suite. */
export function useTempDirs(prefix: string): () => string {
  const dirs: ReturnType<typeof tempDir>[] = [];
  afterAll(() => {
    for (const d of dirs.splice(0)) d.cleanup();
  });
  return () => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d.path;
  };
}
