/**
 * `excompact local` takes the instance secret from the configuration when one is named there, and makes up
 * its own only when none is.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../support/index.js';

describe('excompact local - secret', () => {
  const dirs: ReturnType<typeof tempDir>[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => d.cleanup()));

  async function local(
    secretFile: string,
  ): Promise<{ code: number | null; stderr: string; dataDir: string }> {
    const dir = tempDir('local-secret');
    dirs.push(dir);
    const dataDir = join(dir.path, 'data');
    const r = await runCli(['local', '--data-dir', dataDir, '--no-workload'], {
      env: { EXC_SECRET: undefined, EXC_SECRET_FILE: secretFile, EXC_ZK: undefined },
      timeoutMs: 20_000,
    });
    return { code: r.code, stderr: r.stderr, dataDir };
  }

  it('secret - an unreadable EXC_SECRET_FILE stops it before anything starts', async () => {
    const r = await local('/nonexistent/excompact-secret');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot read EXC_SECRET_FILE \/nonexistent\/excompact-secret/);
    expect(existsSync(join(r.dataDir, 'secret'))).toBe(false);
  });

  it('secret - EXC_SECRET_FILE is checked like every other process checks it', async () => {
    const dir = tempDir('local-secret-file');
    dirs.push(dir);
    const file = join(dir.path, 'secret');
    writeFileSync(file, 'short\n');
    const r = await local(file);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/EXC_SECRET_FILE .*: the instance secret must be at least 16 characters/);
  });
});
