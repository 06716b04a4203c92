/**
 * The S3 object store (`s3://bucket/prefix`), for AWS S3 and S3-compatible servers (MinIO, s3rver).
 *
 * Every request goes through {@link S3ObjectStore.call}: transient failures (throttling, 5xx, timeouts,
 * dropped connections) are retried with jittered exponential backoff (src/retry.ts) and surface as
 * STORE_UNAVAILABLE once the attempts are spent; the SDK's own retries are off (`maxAttempts: 1`) so
 * there is one policy, one log line per retry, and tests can make it fast. A streaming read that breaks
 * mid-body resumes from the last byte received, pinned to the object's ETag.
 */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  type GetObjectCommandOutput,
} from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { describeError, ExcError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { backoffDelay, retry, sleep } from '../retry.js';
import { checkName, checkPrefix, checkRange, isValidName } from './names.js';
import type {
  ObjectInfo,
  ObjectStore,
  ReadOptions,
  StreamOptions,
  TemporaryInfo,
  WriteOptions,
} from './object-store.js';
import { isNotFound, isTransientS3Error, s3Failure, s3Status } from './s3-errors.js';
import { ReadIntoHandler, type ReadIntoOptions } from './s3-read-into.js';
import { uploadObject } from './s3-upload.js';

export interface S3RetryOptions {
  /** Attempts per request, the first included. Default 6. */
  attempts?: number;
  /** Default 100 ms. */
  baseMs?: number;
  /** Default 5 s. */
  maxMs?: number;
}

export interface S3StoreOptions {
  bucket: string;
  /** Key prefix without leading or trailing '/'; '' for the whole bucket. */
  prefix?: string;
  endpoint?: string | undefined;
  /** Default us-east-1. */
  region?: string | undefined;
  /** Both or neither; neither means the AWS default credential chain. */
  accessKeyId?: string | undefined;
  secretAccessKey?: string | undefined;
  forcePathStyle?: boolean | undefined;
  logger?: Logger;
  /** Multipart part size. Default 8 MiB; S3 needs at least 5 MiB for every part but the last. */
  partSize?: number;
  /** Parts uploaded at once. Default 2. */
  partConcurrency?: number;
  retry?: S3RetryOptions;
  /** Default 5 s. */
  connectionTimeoutMs?: number;
  /** Longest a socket may stay idle during a request. Default 30 s. */
  socketTimeoutMs?: number;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** S3's limit on a key, prefix included. */
const MAX_KEY_BYTES = 1024;

export class S3ObjectStore implements ObjectStore {
  readonly url: string;
  readonly bucket: string;
  readonly client: S3Client;
  private readonly keyPrefix: string;
  private readonly log: Logger;
  private readonly partSize: number;
  private readonly partConcurrency: number;
  private readonly retryOptions: Required<S3RetryOptions>;

  constructor(options: S3StoreOptions) {
    if (!BUCKET.test(options.bucket)) {
      throw new ExcError('CONFIG_INVALID', `store s3://${options.bucket}: invalid bucket name`);
    }
    const prefix = options.prefix ?? '';
    if (prefix !== '') checkName(prefix);
    if ((options.accessKeyId === undefined) !== (options.secretAccessKey === undefined)) {
      throw new ExcError(
        'CONFIG_INVALID',
        'S3 credentials: set both the access key id and the secret, or neither',
      );
    }
    this.bucket = options.bucket;
    this.keyPrefix = prefix === '' ? '' : `${prefix}/`;
    this.url = `s3://${options.bucket}${prefix === '' ? '' : `/${prefix}`}`;
    this.log = (options.logger ?? silentLogger()).child({ component: 'object-store', store: this.url });
    this.partSize = options.partSize ?? 8 << 20;
    this.partConcurrency = options.partConcurrency ?? 2;
    this.retryOptions = { attempts: 6, baseMs: 100, maxMs: 5_000, ...options.retry };
    // The SDK warns once per process that its releases after January 2027 need Node 22; this is the
    // supported switch (aws/aws-sdk-js-v3#7983). An operator who sets the variable keeps their choice.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const agentOptions = { keepAlive: true, maxSockets: 64 };
    this.client = new S3Client({
      region: options.region ?? 'us-east-1',
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle ?? false,
      credentials:
        options.accessKeyId !== undefined && options.secretAccessKey !== undefined
          ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey }
          : undefined,
      // S3-compatible servers (s3rver, older MinIO) reject the newer default checksums.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 1,
      // GetObject bodies the caller gives memory for are read into it (s3-read-into.ts).
      requestHandler: new ReadIntoHandler({
        inner: new NodeHttpHandler({
          connectionTimeout: options.connectionTimeoutMs ?? 5_000,
          requestTimeout: options.socketTimeoutMs ?? 30_000,
          httpAgent: new HttpAgent(agentOptions),
          httpsAgent: new HttpsAgent(agentOptions),
        }),
        connectionTimeoutMs: options.connectionTimeoutMs ?? 5_000,
        socketTimeoutMs: options.socketTimeoutMs ?? 30_000,
      }),
    });
  }

  async write(
    name: string,
    body: Buffer | AsyncIterable<Buffer>,
    options: WriteOptions = {},
  ): Promise<{ size: number }> {
    const key = this.key(name);
    options.signal?.throwIfAborted();
    return uploadObject(
      {
        client: this.client,
        bucket: this.bucket,
        key,
        name,
        partSize: this.partSize,
        partConcurrency: this.partConcurrency,
        call: (op, fn) => this.call(op, name, fn, options.signal),
        log: this.log,
        signal: options.signal,
      },
      body,
    );
  }

  async readRange(name: string, offset: number, length: number, options: ReadOptions = {}): Promise<Buffer> {
    const key = this.key(name);
    checkRange(name, offset, length);
    if (length === 0) return Buffer.alloc(0);
    return this.call(
      'GetObject',
      name,
      async () => {
        let resp: GetObjectCommandOutput;
        try {
          resp = await this.client.send(
            new GetObjectCommand({
              Bucket: this.bucket,
              Key: key,
              Range: `bytes=${offset}-${offset + length - 1}`,
            }),
            { abortSignal: options.signal },
          );
        } catch (err) {
          if (s3Status(err) === 416) return Buffer.alloc(0); // offset at or past the end
          throw err;
        }
        const bytes = await resp.Body!.transformToByteArray();
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      },
      options.signal,
    );
  }

  async *readStream(name: string, options: StreamOptions = {}): AsyncGenerator<Buffer> {
    const key = this.key(name);
    const offset = options.offset ?? 0;
    checkRange(name, offset, options.length);
    const { signal } = options;
    const end = options.length === undefined ? undefined : offset + options.length;
    // With `alloc`, the body is read into the caller's memory.
    const sendOptions: ReadIntoOptions = { abortSignal: signal, readInto: options.alloc };
    let pos = offset;
    let etag: string | undefined;
    let failures = 0;
    let failedAt = -1;
    while (end === undefined || pos < end) {
      const from = pos;
      const body = await this.call(
        'GetObject',
        name,
        async () => {
          try {
            const resp = await this.client.send(
              new GetObjectCommand({
                Bucket: this.bucket,
                Key: key,
                // No Range for a whole object: s3rver mishandles "bytes=0-" on an empty one.
                Range:
                  from === 0 && end === undefined
                    ? undefined
                    : `bytes=${from}-${end === undefined ? '' : end - 1}`,
                // A resumed read must continue the same object, not a newer one under the same key.
                IfMatch: etag,
              }),
              sendOptions,
            );
            etag ??= resp.ETag;
            return toReadable(resp.Body);
          } catch (err) {
            if (s3Status(err) === 416) return null;
            throw err;
          }
        },
        signal,
      );
      if (body === null) return;
      try {
        for await (const chunk of body as AsyncIterable<Buffer>) {
          pos += chunk.length;
          yield chunk;
        }
        return;
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        // Attempts count failures in a row: a long read that broke, resumed and moved on starts afresh.
        failures = pos > failedAt ? 1 : failures + 1;
        failedAt = pos;
        if (!isTransientS3Error(err) || failures >= this.retryOptions.attempts) {
          throw s3Failure(err, 'GetObject', this.objectUrl(name), name, failures);
        }
        const delay = backoffDelay(failures - 1, this.retryOptions);
        this.log.warn(
          {
            op: 'GetObject',
            object: name,
            position: pos,
            attempt: failures,
            delayMs: Math.round(delay),
            err: describeError(err),
          },
          'S3 read broke mid-stream; resuming',
        );
        await sleep(delay, signal);
      } finally {
        body.destroy();
      }
    }
  }

  async stat(name: string): Promise<ObjectInfo | null> {
    const key = this.key(name);
    try {
      const head = await this.call('HeadObject', name, () =>
        this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key })),
      );
      return { name, size: head.ContentLength ?? 0, modifiedMs: head.LastModified?.getTime() ?? 0 };
    } catch (err) {
      if (err instanceof ExcError && err.code === 'OBJECT_NOT_FOUND') return null;
      throw err;
    }
  }

  async *list(prefix: string): AsyncGenerator<ObjectInfo> {
    checkPrefix(prefix);
    let token: string | undefined;
    do {
      const continuation = token;
      const page = await this.call('ListObjectsV2', prefix, () =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.keyPrefix + prefix,
            ContinuationToken: continuation,
          }),
        ),
      );
      for (const obj of page.Contents ?? []) {
        if (!obj.Key?.startsWith(this.keyPrefix)) continue;
        const name = obj.Key.slice(this.keyPrefix.length);
        // Keys put there by other tools (a console's `dir/` marker, a name with a space) are not objects
        // of this store: listed, they would fail the caller's delete or read with INVALID_NAME.
        if (!isValidName(name)) continue;
        yield {
          name,
          size: obj.Size ?? 0,
          modifiedMs: obj.LastModified?.getTime() ?? 0,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /**
   * Incomplete multipart uploads under `prefix`: uploads in progress, and those a crashed writer never
   * completed nor aborted (they cost storage until aborted, or until a bucket lifecycle rule does it).
   * NOT_SUPPORTED when the server has no ListMultipartUploads (s3rver).
   */
  async *listTemporaries(prefix: string): AsyncGenerator<TemporaryInfo> {
    checkPrefix(prefix);
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const markers = { KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker };
      const page = await this.call('ListMultipartUploads', prefix, () =>
        this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            Prefix: this.keyPrefix + prefix,
            ...markers,
          }),
        ),
      );
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key?.startsWith(this.keyPrefix) || !upload.UploadId) continue;
        const target = upload.Key.slice(this.keyPrefix.length);
        // As in list: keys no operation of this store accepts are another tool's.
        if (!isValidName(target)) continue;
        yield { target, id: upload.UploadId, modifiedMs: upload.Initiated?.getTime() ?? 0 };
      }
      const more = page.IsTruncated === true && page.NextKeyMarker !== undefined;
      keyMarker = more ? page.NextKeyMarker : undefined;
      uploadIdMarker = more ? page.NextUploadIdMarker : undefined;
    } while (keyMarker !== undefined);
  }

  async delete(name: string): Promise<void> {
    const key = this.key(name);
    // S3 answers 204 for a missing key too: delete is idempotent by nature.
    await this.call('DeleteObject', name, () =>
      this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })),
    );
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  private key(name: string): string {
    const key = this.keyPrefix + checkName(name);
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) {
      throw new ExcError(
        'INVALID_NAME',
        `invalid object name ${JSON.stringify(name)}: the S3 key would exceed ${MAX_KEY_BYTES} bytes`,
        {
          details: { name },
        },
      );
    }
    return key;
  }

  private objectUrl(name: string): string {
    return `${this.url}/${name}`;
  }

  /** One S3 request with the retry policy; failures mapped by s3Failure, an abort passed through as is. */
  private async call<T>(op: string, name: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let attempts = 0;
    try {
      return await retry(
        async () => {
          attempts++;
          return fn();
        },
        {
          ...this.retryOptions,
          signal,
          retryOn: (err) => !signal?.aborted && !isNotFound(err) && isTransientS3Error(err),
          onRetry: (err, attempt, delayMs) =>
            this.log.warn(
              {
                op,
                object: name,
                attempt: attempt + 1,
                delayMs: Math.round(delayMs),
                err: describeError(err),
              },
              'S3 request failed; retrying',
            ),
        },
      );
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw s3Failure(err, op, this.objectUrl(name), name, attempts);
    }
  }
}

function toReadable(body: GetObjectCommandOutput['Body']): Readable {
  if (body instanceof Readable) return body;
  throw new ExcError('INTERNAL', 'S3 GetObject: expected a Node stream as the body');
}
