/**
 * A real S3-compatible server (s3rver) on loopback, in its own process, with a fresh bucket per suite.
 *
 *   const s3 = await startTestS3();   // tests: useS3() from ./s3.ts
 *   s3.storeUrl                       // s3://<bucket>/<prefix>
 *
 * Free of test-framework imports, so the chaos run uses it too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { tempDir, uniqueName } from './tmp.js';

export interface TestS3 {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  bucket: string;
  /** `s3://<bucket>/excompact`. */
  storeUrl: string;
  /** Settings for src/config.ts (as environment variables for spawned processes). */
  env: Record<string, string>;
  pid: number;
  client(): S3Client;
  /** A new, empty bucket on the same server. */
  newBucket(): Promise<string>;
  stop(): Promise<void>;
}

const MAIN = fileURLToPath(new URL('../../scripts/s3rver.cjs', import.meta.url));

/** Starts s3rver; its data go to `options.dir` (kept) or a temporary directory (removed by stop()). */
export async function startTestS3(options: { dir?: string } = {}): Promise<TestS3> {
  const dir = options.dir ? { path: options.dir, cleanup: () => undefined } : tempDir('s3');
  const child = spawn(process.execPath, [MAIN, dir.path], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`s3rver did not start within 20 s: ${stderr}`)), 20_000);
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout }).once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { port: number }).port);
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  const clients: S3Client[] = [];
  const client = (): S3Client => {
    const c = new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    clients.push(c);
    return c;
  };
  const admin = client();
  const newBucket = async (): Promise<string> => {
    const name = uniqueName('t-');
    await admin.send(new CreateBucketCommand({ Bucket: name }));
    return name;
  };
  const bucket = await newBucket();
  return {
    endpoint,
    region: 'us-east-1',
    ...credentials,
    bucket,
    storeUrl: `s3://${bucket}/excompact`,
    env: {
      EXC_STORE: `s3://${bucket}/excompact`,
      EXC_S3_ENDPOINT: endpoint,
      EXC_S3_REGION: 'us-east-1',
      EXC_S3_ACCESS_KEY_ID: credentials.accessKeyId,
      EXC_S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      EXC_S3_FORCE_PATH_STYLE: 'true',
    },
    pid: child.pid!,
    client,
    newBucket,
    stop: async () => {
      for (const c of clients) c.destroy();
      await stopChild(child);
      dir.cleanup();
    },
  };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
  await exited;
  clearTimeout(timer);
}
