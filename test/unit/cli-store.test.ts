/**
 * `excompact admin store init`: creates a missing S3 bucket, and prepares a local directory given by a
 * relative file:// URL under the working directory.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, tempDir, uniqueName, useS3 } from '../support/index.js';

const run = promisify(execFile);

/** Runs `excompact admin store init` in `cwd`; resolves with its output, rejects when it fails. */
async function storeInit(env: Record<string, string>, cwd = process.cwd()): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, 'admin', 'store', 'init'], {
    cwd,
    env: { ...process.env, ...env },
    timeout: 30_000,
  });
  return stdout;
}

describe('excompact admin store init', () => {
  const s3 = useS3();
  const dirs: ReturnType<typeof tempDir>[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => d.cleanup()));

  it('store init - creates a missing bucket once, then finds it', async () => {
    const bucket = uniqueName('init-');
    const env = { ...s3().env, EXC_STORE: `s3://${bucket}/data` };
    expect(await storeInit(env)).toBe(`created bucket ${bucket}\nstore s3://${bucket}/data is ready\n`);
    expect(await storeInit(env)).toBe(`store s3://${bucket}/data is ready\n`);
  });

  it('store init - a relative file:// store is created under the working directory', async () => {
    const dir = tempDir('store-init');
    dirs.push(dir);
    for (const path of ['data/store', 'my data/store']) {
      expect(await storeInit({ EXC_STORE: `file://${path}` }, dir.path)).toBe(
        `store file://${path} is ready\n`,
      );
      expect(existsSync(join(dir.path, path))).toBe(true);
    }
  });
});
