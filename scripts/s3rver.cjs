// Runs s3rver (an S3-compatible server) for the test harness and `npm start -- --s3`:
// `node scripts/s3rver.cjs <dir> [port]`.
// Prints {"port": N} on stdout once it listens; stops on SIGTERM.
'use strict';
const fs = require('fs');
const path = require('path');

// s3rver lists a bucket by walking its directory tree: in readdir order (S3 lists in key order, which
// paging with a continuation key relies on), and failing the whole listing with a 500 when an object is
// deleted during the walk (a garbage collector deleting while another process lists). Both are bugs of
// the test server, not behaviours of S3: replace the walk with one that goes in name order and skips
// entries that vanish. It must be patched before the store module takes its reference to it.
const utils = require('s3rver/lib/utils');
utils.walk = function* walk(dir, recurseFilter) {
  let names;
  try {
    names = fs.readdirSync(dir).sort();
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  for (const filename of names) {
    const filePath = path.posix.join(dir, filename);
    let stats;
    try {
      stats = fs.statSync(filePath);
    } catch (err) {
      if (err.code === 'ENOENT') continue;
      throw err;
    }
    if (!stats.isDirectory()) yield filePath;
    else if (!recurseFilter || recurseFilter(filePath)) yield* walk(filePath, recurseFilter);
  }
};

// Its ListObjectsV2 continuation tokens are encrypted with DES, which OpenSSL 3 (Node >= 17) refuses, so
// every listing of more than one page failed. The token need not be secret here: 'des' becomes the
// identity (the token is then the IV and the key name in the clear).
const crypto = require('crypto');
const identity = () => ({
  update: (data, encoding) => Buffer.from(data, encoding),
  final: () => Buffer.alloc(0),
});
const { createCipheriv, createDecipheriv } = crypto;
crypto.createCipheriv = (algorithm, ...rest) =>
  algorithm === 'des' ? identity() : createCipheriv(algorithm, ...rest);
crypto.createDecipheriv = (algorithm, ...rest) =>
  algorithm === 'des' ? identity() : createDecipheriv(algorithm, ...rest);

// It writes an upload straight to the object's file: an upload cut half way leaves a truncated object
// (and the aborted request can truncate the object a retry has just written), and it answers before the
// file is flushed. S3 stores a PUT whole or not at all: write to a temporary file, and rename it into
// place once the body has arrived whole and is on disk.
const { pipeline, Transform } = require('stream');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

function writeWhole(finalPath, content) {
  const temp = `${finalPath}.${crypto.randomBytes(6).toString('hex')}.uploading`;
  const md5 = crypto.createHash('md5');
  let size = 0;
  const source = Buffer.isBuffer(content) ? require('stream').Readable.from([content]) : content;
  return new Promise((resolve, reject) => {
    pipeline(
      source,
      new Transform({
        transform(chunk, _encoding, callback) {
          md5.update(chunk);
          size += chunk.length;
          callback(null, chunk);
        },
      }),
      fs.createWriteStream(temp),
      (err) => {
        if (err) {
          fs.rm(temp, { force: true }, () => reject(err));
          return;
        }
        fs.rename(temp, finalPath, (renameErr) =>
          renameErr ? reject(renameErr) : resolve([size, md5.digest('hex')]),
        );
      },
    );
  });
}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  fs.mkdirSync(path.dirname(objectPath), { recursive: true });
  const [size, md5] = await writeWhole(objectPath, object.content);
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size, md5 };
};

FilesystemStore.prototype.putPart = async function putPart(bucket, uploadId, partNumber, content) {
  const partPath = path.join(
    this.getResourcePath(bucket, undefined, 'uploads'),
    uploadId,
    partNumber.toString(),
  );
  fs.mkdirSync(path.dirname(partPath), { recursive: true });
  const [size, md5] = await writeWhole(partPath, content);
  fs.writeFileSync(`${partPath}.md5`, md5);
  return { size, md5 };
};

// Two costs that grow with the test, not with S3's work. A delete checks whether the object's directory
// became empty by listing it (readdirSync): one listing of the whole table directory per deleted file.
// rmdir does the same check in the kernel, failing on a directory that is not empty.
FilesystemStore.prototype.deleteObject = async function deleteObject(bucket, key) {
  await Promise.all(
    ['object', 'object.md5', 'metadata.json'].map((resource) =>
      fs.promises.unlink(this.getResourcePath(bucket, key, resource)).catch((err) => {
        if (err.code !== 'ENOENT') throw err;
      }),
    ),
  );
  const parts = key.split('/');
  parts.pop(); // the last part is in the file name, not a directory
  while (parts.length) {
    try {
      fs.rmdirSync(path.join(this.getBucketPath(bucket), ...parts));
    } catch (err) {
      if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST' || err.code === 'ENOENT') return;
      throw err;
    }
    parts.pop();
  }
};

// And every request reads the bucket's CORS and website configurations from files (which the tests
// never write, so each read is a failed open): keep what was read until a configuration is put or
// deleted.
const readSubresource = FilesystemStore.prototype.getSubresource;
const subresources = new Map();
FilesystemStore.prototype.getSubresource = function getSubresource(bucket, key, resourceType) {
  if (key !== undefined) return readSubresource.call(this, bucket, key, resourceType);
  const cacheKey = `${bucket}/${resourceType}`;
  let found = subresources.get(cacheKey);
  if (!found) {
    found = readSubresource.call(this, bucket, key, resourceType);
    subresources.set(cacheKey, found);
    found.catch(() => subresources.delete(cacheKey));
  }
  return found;
};
for (const method of ['putSubresource', 'deleteSubresource', 'putBucket', 'deleteBucket']) {
  const original = FilesystemStore.prototype[method];
  FilesystemStore.prototype[method] = async function (bucket, ...rest) {
    for (const cacheKey of subresources.keys())
      if (cacheKey.startsWith(`${bucket}/`)) subresources.delete(cacheKey);
    try {
      return await original.call(this, bucket, ...rest);
    } finally {
      for (const cacheKey of subresources.keys())
        if (cacheKey.startsWith(`${bucket}/`)) subresources.delete(cacheKey);
    }
  };
}

const S3rver = require('s3rver');

const [directory, port] = process.argv.slice(2);
const server = new S3rver({ address: '127.0.0.1', port: Number(port ?? 0), directory, silent: true });
server.run().then(
  (address) => process.stdout.write(`${JSON.stringify({ port: address.port })}\n`),
  (err) => {
    process.stderr.write(`s3rver failed to start: ${err.stack}\n`);
    process.exit(1);
  },
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
// Never outlive the test run that started us.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 500).unref();
