/**
 * The test harness itself: the servers it starts are real and ours, and project processes can be
 * started, watched, paused, killed and stopped.
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { fourLetterWord, freePort, startEmbeddedZooKeeper } from '../../src/zk/embedded.js';
import { tempDir, useProcesses, useS3, useZooKeeper } from '../support/index.js';

async function portOpen(port: number): Promise<boolean> {
  return fourLetterWord(port, 'ruok', 500).then(
    (answer) => answer === 'imok',
    () => false,
  );
}

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

describe('harness - processes (excompact local)', () => {
  const procs = useProcesses();

  async function startLocal(extra: string[] = []) {
    const dir = tempDir('local');
    const port = await freePort();
    const proc = await procs.start(
      'local',
      ['local', '--data-dir', dir.path, '--zk-port', String(port), ...extra],
      {
        env: { EXC_SECRET: undefined },
      },
    );
    return { proc, port, dir };
  }

  it('npm start demo: starts ZooKeeper, shows an ephemeral node released on close, stops cleanly on SIGTERM', async () => {
    const { proc, port, dir } = await startLocal();
    await proc.waitForLog((l) => /excompact local: ready/.test(l.msg ?? ''));
    expect(proc.lines.some((l) => /released +watcher saw 'deleted'/.test(l.msg ?? ''))).toBe(true);
    expect(await portOpen(port)).toBe(true);

    expect(await proc.terminate()).toEqual({ code: 0, signal: null });
    expect(await portOpen(port)).toBe(false);
    dir.cleanup();
  });

  it('a SIGKILLed parent leaves no ZooKeeper behind; SIGSTOP/SIGCONT pause and resume it', async () => {
    const { proc, port, dir } = await startLocal();
    await proc.waitForLog((l) => /excompact local: ready/.test(l.msg ?? ''));

    proc.pause();
    expect(proc.running).toBe(true);
    proc.resume();

    proc.kill();
    expect(await proc.waitExit()).toEqual({ code: null, signal: 'SIGKILL' });
    const deadline = Date.now() + 5_000;
    while ((await portOpen(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await portOpen(port)).toBe(false);
    dir.cleanup();
  });
});
