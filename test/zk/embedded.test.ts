import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedZooKeeper } from '../../src/zk/index.js';
import { tempDir } from '../support/tmp.js';

describe('embedded zookeeper', () => {
  const dir = tempDir('zk-embedded');
  afterAll(() => dir.cleanup());

  it('start - a data directory whose path holds quotes and $ starts, and stops, its own server', async () => {
    // The guard script once pasted the pid file's path between single quotes: this path broke it.
    const dataDir = join(dir.path, `it's $(touch injected) "here"`);
    const zk = await startEmbeddedZooKeeper({ dataDir });
    try {
      expect(zk.pid).toBeGreaterThan(0);
      expect(await zk.fourLetter('ruok')).toBe('imok');
      expect(existsSync(join(dir.path, 'injected'))).toBe(false);
    } finally {
      await zk.stop();
    }
    expect(() => process.kill(zk.pid, 0)).toThrow();
  });
});
