import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh temporary directory, removed by the returned cleanup (or left for inspection with EXC_KEEP_TMP=1). */
export function tempDir(prefix: string): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), `exc-${prefix}-`));
  return {
    path,
    cleanup: () => {
      if (process.env.EXC_KEEP_TMP !== '1') rmSync(path, { recursive: true, force: true });
    },
  };
}

/** A short random name, unique enough for a test's ZooKeeper root or bucket. */
export function uniqueName(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}
