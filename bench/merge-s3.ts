/**
 * An S3-compatible server (s3rver) for the merge benchmark, in its own process on loopback (so that its
 * CPU is not the benchmark's), with one bucket. The server is scripts/s3rver.cjs, the launcher of
 * `npm start -- --s3` and of the test harness.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

/** `node scripts/s3rver.cjs <dir>`: listens on a free port, prints {"port": N} once it does. */
const LAUNCHER = fileURLToPath(new URL('../scripts/s3rver.cjs', import.meta.url));

export interface BenchS3 {
  endpoint: string;
  bucket: string;
  stop(): Promise<void>;
}

export async function startS3(): Promise<BenchS3> {
  const dir = mkdtempSync(join(tmpdir(), 'exc-merge-bench-s3-'));
  const child = spawn(process.execPath, [LAUNCHER, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('s3rver did not start within 20 s')), 20_000);
      child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
      createInterface({ input: child.stdout }).once('line', (line) => {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { port: number }).port);
      });
    });
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const bucket = 'bench';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const admin = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  admin.destroy();
  return {
    endpoint,
    bucket,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
