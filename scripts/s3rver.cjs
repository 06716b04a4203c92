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
