/**
 * An S3-compatible server (s3rver) for the merge benchmark, in its own process on loopback (so that its
 * CPU is not the benchmark's), with one bucket. The launcher is inlined: the bench depends on no file of
 * the test harness.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

/** Runs s3rver on a free port in the directory given as argument; prints {"port": N} once it listens. */
const LAUNCHER = `
const S3rver = require('s3rver');
const server = new S3rver({ address: '127.0.0.1', port: 0, directory: process.argv[1], silent: true });
server.run().then(
  (address) => process.stdout.write(JSON.stringify({ port: address.port }) + '\\n'),
  (err) => { process.stderr.write(String(err && err.stack) + '\\n'); process.exit(1); },
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 500).unref();
`;

export interface BenchS3 {
  endpoint: string;
  bucket: string;
  stop(): Promise<void>;
}

export async function startS3(): Promise<BenchS3> {
  const dir = mkdtempSync(join(tmpdir(), 'exc-merge-bench-s3-'));
  // Resolved from the project root, where s3rver is a dev dependency.
  const child = spawn(process.execPath, ['-e', LAUNCHER, dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
    cwd: new URL('..', import.meta.url).pathname,
  });
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
