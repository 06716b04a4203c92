/**
 * A real S3-compatible server for a test suite (see ./s3-server.ts).
 *
 *   const s3 = useS3();     // in a describe block
 *   s3().storeUrl           // s3://<bucket>/<prefix>
 */
import { afterAll, beforeAll } from 'vitest';
import { startTestS3, type TestS3 } from './s3-server.js';

export { startTestS3, type TestS3 } from './s3-server.js';

/** Starts an S3 server for the enclosing suite. */
export function useS3(): () => TestS3 {
  let server: TestS3 | undefined;
  beforeAll(async () => {
    server = await startTestS3();
  });
  afterAll(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error('S3 is not started: call useS3() inside a describe block');
    return server;
  };
}
