/**
 * The chaos run counts the checks of the manager's two followed indexes from the lines logCheck writes
 * (chaos/logs.ts): a drift between the two would make every check, and every difference, go unseen.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLogs } from '../../chaos/logs.js';
import { createLogger } from '../../src/log.js';
import { logCheck } from '../../src/manager/followed-index.js';

describe('chaos logs - index checks', () => {
  it("counts each index's checks and differences from the manager's log lines", async () => {
    const lines: string[] = [];
    const log = createLogger({ name: 'manager', destination: { write: (l: string) => void lines.push(l) } });
    logCheck(log, 'reference index', [], { tablets: 1, files: 2 });
    logCheck(log, 'reference index', ['tables/0001/A.rf']);
    logCheck(log, 'activity index', []);
    logCheck(log, 'activity index', undefined); // just built: not a check
    const dir = mkdtempSync(join(tmpdir(), 'chaos-logs-'));
    try {
      writeFileSync(join(dir, 'manager-1.log'), lines.join(''));
      const found = await readLogs(dir);
      expect(found.referenceIndex).toEqual({ checks: 2, mismatches: 1 });
      expect(found.activityIndex).toEqual({ checks: 1, mismatches: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
