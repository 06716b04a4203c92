/**
 * `excompact admin store init`: prepares the object store — creates the S3 bucket (or the local directory)
 * when missing — and proves that this configuration can write, read and delete in it.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { CreateBucketCommand, HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { Command } from 'commander';
import { ExcError } from '../errors.js';
import { openObjectStore } from '../storage/index.js';
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
        if (config.store.startsWith('s3://')) {
          const bucket = config.store.slice('s3://'.length).split('/')[0]!;
          const s3 = new S3Client({
            region: config.s3Region,
            forcePathStyle: config.s3ForcePathStyle,
            ...(config.s3Endpoint ? { endpoint: config.s3Endpoint } : {}),
            ...(config.s3AccessKeyId && config.s3SecretAccessKey
              ? {
                  credentials: {
                    accessKeyId: config.s3AccessKeyId,
                    secretAccessKey: config.s3SecretAccessKey,
                  },
                }
              : {}),
          });
          try {
            const exists = await s3.send(new HeadBucketCommand({ Bucket: bucket })).then(
              () => true,
              (err: { $metadata?: { httpStatusCode?: number }; name?: string }) => {
                if (err.$metadata?.httpStatusCode === 404 || err.name === 'NotFound') return false;
                throw new ExcError(
                  'STORE_UNAVAILABLE',
                  `cannot reach bucket ${bucket} at ${config.s3Endpoint ?? 'AWS'}: ${err.name ?? 'unknown error'}`,
                );
              },
            );
            if (!exists) {
              await s3.send(new CreateBucketCommand({ Bucket: bucket }));
              process.stdout.write(`created bucket ${bucket}\n`);
            }
          } finally {
            s3.destroy();
          }
        } else if (config.store.startsWith('file://')) {
          const url = new URL(config.store.replace('file://./', `file://${process.cwd()}/`));
          mkdirSync(decodeURIComponent(url.pathname), { recursive: true });
        }
        const store = openObjectStore(config);
        try {
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
