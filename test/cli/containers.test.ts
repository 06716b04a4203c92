/**
 * What a container runtime relies on (docker-compose.yml, `npm run test:compose`): a process started with
 * port 0 tells `excompact health` its port through EXC_PORT_FILE, and a compactor pool whose queue is
 * deleted stops with the exit code the restart policy needs (EXC_QUEUE_GONE_EXIT_CODE) — also when it is
 * started again for the queue that is gone.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliOk as ok } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

describe('containers', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('health - a process on port 0 writes its port to EXC_PORT_FILE, and health reads it', async () => {
    const c = cluster();
    const dir = tempDir('port-file');
    const portFile = join(dir.path, 'excompact.port');
    await c.startManager();
    const tserver = await c.startTserver({ env: { EXC_PORT: '0', EXC_PORT_FILE: portFile } });
    const port = readFileSync(portFile, 'utf8').trim();
    expect(tserver.server).toBe(`127.0.0.1:${port}`);
    const healthy = await c.cli(['health'], { env: { EXC_PORT: '0', EXC_PORT_FILE: portFile } });
    expect(healthy.code, healthy.stderr).toBe(0);
    expect(JSON.parse(healthy.stdout)).toEqual({ ok: true, state: 'serving' });

    // Not written yet (the process is starting): unhealthy, not a usage error.
    const missing = join(dir.path, 'none.port');
    const starting = await c.cli(['health'], { env: { EXC_PORT: '0', EXC_PORT_FILE: missing } });
    expect(starting.code).toBe(2);
    expect(starting.stderr).toMatch(/^excompact: UNAVAILABLE: no port in .*none\.port/);
    const noPort = await c.cli(['health'], { env: { EXC_PORT: '0', EXC_PORT_FILE: undefined } });
    expect(noPort.code).toBe(1);
    expect(noPort.stderr).toMatch(/no port to check: give --port, EXC_PORT or EXC_PORT_FILE/);
    dir.cleanup();
  });

  it('queue delete - with EXC_QUEUE_GONE_EXIT_CODE=0 its compactor exits 0, and exits 0 again when restarted', async () => {
    const c = cluster();
    await c.startManager();
    await c.startTserver();
    await ok(c, ['admin', 'queue', 'create', 'doomed']);
    const env = { EXC_QUEUE_GONE_EXIT_CODE: '0' };
    const compactor = await c.startCompactor('doomed', { env });
    await ok(c, ['admin', 'queue', 'delete', 'doomed']);
    expect((await compactor.waitExit(15_000)).code).toBe(0);

    // A container restarted after the delete: the same clean stop, not exit 1 (a restart loop).
    const again = await c.start('compactor-again', ['compactor', 'doomed'], { env });
    expect((await again.waitExit(15_000)).code).toBe(0);
    // Without the setting, a missing queue at start stays a user error.
    const plain = await c.start('compactor-plain', ['compactor', 'doomed']);
    expect((await plain.waitExit(15_000)).code).toBe(1);
  });
});
