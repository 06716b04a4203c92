/**
 * What `excompact local` starts beside its processes (local-cluster.ts): an S3 server when asked for one
 * without an endpoint, the instance secret kept in the data directory, the ports it prefers.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ExcError } from '../errors.js';
import { freePort } from '../zk/index.js';

const S3RVER = fileURLToPath(new URL('../../scripts/s3rver.cjs', import.meta.url));

/** An S3 server (s3rver) for `--s3` without an endpoint, with a bucket `excompact`. */
export async function startLocalS3(
  dir: string,
): Promise<{ env: Record<string, string>; stop: () => Promise<void> }> {
  mkdirSync(dir, { recursive: true });
  const child = spawn(process.execPath, [S3RVER, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolvePort, reject) => {
    child.once('exit', (code) =>
      reject(new ExcError('UNAVAILABLE', `the embedded S3 server exited (${code})`)),
    );
    createInterface({ input: child.stdout }).once('line', (line) =>
      resolvePort((JSON.parse(line) as { port: number }).port),
    );
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3');
  const s3 = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  await s3.send(new CreateBucketCommand({ Bucket: 'excompact' })).catch(() => undefined);
  s3.destroy();
  return {
    env: {
      EXC_STORE: 's3://excompact/data',
      EXC_S3_ENDPOINT: endpoint,
      EXC_S3_REGION: 'us-east-1',
      EXC_S3_ACCESS_KEY_ID: 'S3RVER',
      EXC_S3_SECRET_ACCESS_KEY: 'S3RVER',
      EXC_S3_FORCE_PATH_STYLE: 'true',
    },
    stop: async () => {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The secret of the local instance: generated once and kept in the data directory (mode 0600). */
export function localSecret(dataDir: string): string {
  const file = join(dataDir, 'secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const secret = randomBytes(24).toString('base64url');
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

/** The port when it is free on the loopback interface, else any free port. */
export async function preferredPort(port: number): Promise<number> {
  const free = await new Promise<boolean>((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolveFree(true)));
  });
  return free ? port : freePort();
}
