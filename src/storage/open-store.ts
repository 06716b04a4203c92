/**
 * Opening the object store a URL names: `file://` a local directory (local.ts), `s3://` S3 (s3.ts). Apart
 * from the interface (object-store.ts), which the implementations import.
 */
import { ExcError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { LocalObjectStore } from './local.js';
import type { ObjectStore } from './object-store.js';
import { S3ObjectStore, type S3StoreOptions } from './s3.js';

/** The store settings of src/config.ts (a Config is accepted as is). */
export interface StoreSettings {
  store: string;
  s3Endpoint?: string | undefined;
  s3Region?: string | undefined;
  s3AccessKeyId?: string | undefined;
  s3SecretAccessKey?: string | undefined;
  s3ForcePathStyle?: boolean | undefined;
}

/** Tuning that is not configuration: part size, retry policy. Tests make retries fast with it. */
export type StoreTuning = Pick<S3StoreOptions, 'partSize' | 'partConcurrency' | 'retry'>;

/**
 * Opens the store named by `settings.store`: `file:///abs/path` or `file://./relative/path` (relative
 * to the working directory) for a local directory, `s3://bucket[/prefix]` for S3.
 */
export function openObjectStore(
  settings: StoreSettings,
  logger?: Logger,
  tuning: StoreTuning = {},
): ObjectStore {
  const log = logger ?? silentLogger();
  const url = settings.store;
  if (url.startsWith('file://')) return LocalObjectStore.fromUrl(url);
  if (url.startsWith('s3://')) {
    const rest = url.slice('s3://'.length).replace(/\/+$/, '');
    const slash = rest.indexOf('/');
    const bucket = slash < 0 ? rest : rest.slice(0, slash);
    const prefix = slash < 0 ? '' : rest.slice(slash + 1);
    return new S3ObjectStore({
      bucket,
      prefix,
      endpoint: settings.s3Endpoint,
      region: settings.s3Region,
      accessKeyId: settings.s3AccessKeyId,
      secretAccessKey: settings.s3SecretAccessKey,
      forcePathStyle: settings.s3ForcePathStyle,
      logger: log,
      ...tuning,
    });
  }
  throw new ExcError(
    'CONFIG_INVALID',
    `store ${JSON.stringify(url)}: expected file:///path or s3://bucket/prefix`,
  );
}
