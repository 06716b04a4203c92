/**
 * `excompact admin store init`: prepares the object store — creates the S3 bucket when missing (a local
 * directory is created by the first write) — and proves that this configuration can write, read and delete
 * in it.
 */
import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import type { S3ObjectStore } from '../storage/index.js';
import { configFrom } from './connect.js';
import { action } from './exit.js';

export function registerStore(admin: Command): void {
  admin
    .command('store')
    .description('The object store.')
    .command('init')
    .description('Create the bucket (or directory) of EXC_STORE when missing and check that it is writable.')
    .addHelpText(
      'after',
      '\nExamples:\n  EXC_STORE=s3://excompact/data EXC_S3_ENDPOINT=http://minio:9000 excompact admin store init\n',
    )
    .action(
      action(async (_opts: unknown, cmd: Command) => {
        const config = configFrom(cmd);
        const [{ CreateBucketCommand }, { S3ObjectStore, openObjectStore }] = await Promise.all([
          import('@aws-sdk/client-s3'),
          import('../storage/index.js'),
        ]);
        const store = openObjectStore(config);
        try {
          if (store instanceof S3ObjectStore && !(await bucketExists(store, config.s3Endpoint))) {
            await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
            process.stdout.write(`created bucket ${store.bucket}\n`);
          }
          const probe = `_probe/${randomBytes(8).toString('hex')}`;
          await store.write(probe, Buffer.from('excompact'));
          const back = await store.readRange(probe, 0, 9);
          await store.delete(probe);
          if (back.toString() !== 'excompact')
            throw new ExcError('STORE_UNAVAILABLE', `${config.store}: read back something else`);
        } finally {
          await store.close();
        }
        process.stdout.write(`store ${config.store} is ready\n`);
      }),
    );
}

async function bucketExists(store: S3ObjectStore, endpoint: string | undefined): Promise<boolean> {
  const { HeadBucketCommand } = await import('@aws-sdk/client-s3');
  return store.client.send(new HeadBucketCommand({ Bucket: store.bucket })).then(
    () => true,
    (err: { $metadata?: { httpStatusCode?: number }; name?: string }) => {
      if (err.$metadata?.httpStatusCode === 404 || err.name === 'NotFound') return false;
      throw new ExcError(
        'STORE_UNAVAILABLE',
        `cannot reach bucket ${store.bucket} at ${endpoint ?? 'AWS'}: ${err.name ?? 'unknown error'}`,
      );
    },
  );
}
