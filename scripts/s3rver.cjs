// Runs s3rver (an S3-compatible server) for the test harness and `npm start -- --s3`:
// `node scripts/s3rver.cjs <dir> [port]`.
// Prints {"port": N} on stdout once it listens; stops on SIGTERM.
'use strict';
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
