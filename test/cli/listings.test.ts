/**
 * What operators read in a terminal: compactors by short names (queue@host#seq) in listings, the full
 * node paths kept in --json; `admin compactions list --watch` listing again until Ctrl-C, then exit 0.
 */
import { describe, expect, it } from 'vitest';
import { useCluster, useProcesses, useZooKeeper } from '../support/index.js';

describe('listings', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('listings - short compactor names, full paths in --json, --watch repeats until SIGINT', async () => {
    const c = cluster();
    await c.startWithTable({ table: 't', queue: 'small' });
    const compactor = await c.startCompactor('small');
    const seq = Number(/-c-(\d+)$/.exec(compactor.compactor)![1]);

    const list = await c.cli(['admin', 'compactors', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^small@\\S+#${seq} +small `, 'm'));
    expect(list.stdout).not.toContain('_c_');
    const json = await c.cli(['admin', 'compactors', 'list', '--json']);
    expect((JSON.parse(json.stdout) as { path: string }[]).map((x) => x.path)).toEqual([compactor.compactor]);

    const watching = await c.start('watch', ['admin', 'compactions', 'list', '--watch', '200']);
    const frames = () => watching.lines.filter((l) => /^── \d\d:\d\d:\d\d ─ every 200 ms$/.test(l.msg ?? ''));
    await watching.waitForLog(() => frames().length >= 3, 15_000);
    expect(watching.lines.some((l) => l.msg === 'running (0):')).toBe(true);
    watching.signal('SIGINT');
    expect(await watching.waitExit(10_000)).toEqual({ code: 0, signal: null });
  });
});
