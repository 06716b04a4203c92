/**
 * Prints what the AWS SDK writes to stderr when an S3 client is first used in a fresh process:
 * `s3-warning.ts store <endpoint>` goes through S3ObjectStore, `s3-warning.ts bare <endpoint>` uses a
 * plain S3Client (the control: it shows the warning that the store suppresses).
 */
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { S3ObjectStore } from '../../../src/storage/index.js';

const [mode, endpoint] = process.argv.slice(2);
const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
if (mode === 'bare') {
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials });
  await client.send(new HeadBucketCommand({ Bucket: 'none' })).catch(() => undefined);
  client.destroy();
} else {
  const store = new S3ObjectStore({
    bucket: 'none',
    endpoint,
    forcePathStyle: true,
    ...credentials,
    retry: { attempts: 1 },
  });
  await store.stat('x').catch(() => undefined);
  await store.close();
}
process.stdout.write('done\n');
