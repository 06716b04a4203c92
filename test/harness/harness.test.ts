/**
 * The test harness itself: the servers it starts are real and ours, and the invariant checks can fail.
 * (Process control is exercised by every process test, and by test/cluster/local.test.ts.)
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { startEmbeddedZooKeeper } from '../../src/zk/embedded.js';
import {
  TestCompactor,
  checkNoDeadReservations,
  tempDir,
  useCluster,
  useProcesses,
  useS3,
  useZooKeeper,
} from '../support/index.js';

describe('harness - zookeeper', () => {
  const zk = useZooKeeper();

  it('is a live server with four-letter words enabled and our data directory', async () => {
    expect(await zk().fourLetter('ruok')).toBe('imok');
    expect(await zk().fourLetter('conf')).toContain(zk().dataDir);
    expect(await zk().fourLetter('mntr')).toContain('zk_server_state');
  });

  it('refuses to hand out a server on a port that another server owns', async () => {
    const dir = tempDir('zk-clash');
    try {
      await expect(
        startEmbeddedZooKeeper({ dataDir: dir.path, port: zk().port, startTimeoutMs: 10_000 }),
      ).rejects.toThrow(/ZooKeeper (exited during start-up|did not start)/);
      expect(await zk().fourLetter('ruok')).toBe('imok');
    } finally {
      dir.cleanup();
    }
  });
});

describe('harness - s3', () => {
  const s3 = useS3();

  it('serves the S3 API with a fresh bucket per suite', async () => {
    const client = s3().client();
    await client.send(new PutObjectCommand({ Bucket: s3().bucket, Key: 'a/b.txt', Body: 'hello' }));
    const got = await client.send(
      new GetObjectCommand({ Bucket: s3().bucket, Key: 'a/b.txt', Range: 'bytes=1-3' }),
    );
    expect(await got.Body?.transformToString()).toBe('ell');
    const other = await s3().newBucket();
    await expect(client.send(new GetObjectCommand({ Bucket: other, Key: 'a/b.txt' }))).rejects.toMatchObject({
      name: 'NoSuchKey',
    });
  });
});

describe('harness - invariant checks', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('checkNoDeadReservations passes a live compactor and fails on a reservation its server never cancels', async () => {
    const s = await cluster().startWithTable();
    for (let i = 0; i < 3; i++) {
      await s.client.ingest('TABLE1', [{ row: `r${i}`, cf: 'f', cq: 'q', ts: 1, value: 'v' }]);
    }
    const c = await TestCompactor.start(cluster(), 'size256M');
    expect(await c.reserve(s.tablets[0]!.tablet)).not.toBeNull();
    expect(await checkNoDeadReservations(cluster(), s.meta)).toBe(1);

    // The tablet server freezes, so nothing cancels the reservation once the compactor is gone.
    s.tserver.pause();
    await c.close();
    await expect(checkNoDeadReservations(cluster(), s.meta, { marginMs: 200 })).rejects.toThrow(
      /reservations of compactors whose node is gone/,
    );
  });
});
