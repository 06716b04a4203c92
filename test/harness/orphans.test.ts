/**
 * A test run that is killed (SIGKILL: no cleanup runs) leaves nothing running: every process the harness
 * starts — ZooKeeper, the project's servers — watches its parent and exits when it goes.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/index.js';

const CHILD = fileURLToPath(new URL('../fixtures/harness/child.ts', import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('a killed harness', () => {
  it('leaves no ZooKeeper, manager or tablet server behind', async () => {
    const harness = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: harness.stdout });
    const { dir, pids } = await new Promise<{ dir: string; pids: number[] }>((resolve, reject) => {
      lines.on('line', (line) => resolve(JSON.parse(line) as { dir: string; pids: number[] }));
      harness.on('exit', (code) => reject(new Error(`the harness exited first (${code})`)));
    });
    expect(pids).toHaveLength(3);
    expect(pids.every(alive)).toBe(true);

    harness.kill('SIGKILL');
    await waitFor(async () => !pids.some(alive), 'every process of the killed harness to exit', 20_000);
    rmSync(dir, { recursive: true, force: true });
  });
});
