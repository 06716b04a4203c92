/**
 * Clients of the manager ride through a failover: the CLI, the client library, tablet servers (an ingest
 * is written through one) and compactors (looking for work, committing). Calls in flight to a paused
 * manager move to its successor as soon as it is active; a gap longer than the session timeout is
 * ridden through up to EXC_MANAGER_FAILOVER_MS; and when no manager answers in time the CLI exits 2
 * saying what it tried — never 1.
 */
import { describe, expect, it } from 'vitest';
import { ExcClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { createQueue } from '../../src/queue/registry.js';
import { useCluster, useProcesses, useZooKeeper, type LogLine, type TestCluster } from '../support/index.js';

const logTime = (l: LogLine): number => Date.parse(l.time as string);

describe('manager failover - clients', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  async function table(c: TestCluster): Promise<ExcClient> {
    await createQueue(await c.session(), c.layout, 'q', 4);
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 't', config: { queues: [{ queue: 'q' }] } });
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger() });
    await client.ingest('t', [{ row: 'warm', value: 'up' }]);
    return client;
  }

  const rows = (prefix: string, n: number, ts: number) =>
    Array.from({ length: n }, (_, i) => ({ row: `${prefix}${i}`, ts, value: 'x'.repeat(100) }));

  it('failover - calls in flight to a paused manager move to its successor within about a second of it being active', async () => {
    const c = cluster();
    const old = await c.startManager({ name: 'manager-1' });
    const standby = await c.startManager({ name: 'manager-2', standby: true });
    const tserver = await c.startTserver();
    const client = await table(c);
    const compactor = await c.startCompactor('q');
    await new Promise((r) => setTimeout(r, 300)); // the compactor's long poll is waiting on the manager

    old.pause();
    const done: Record<string, number> = {};
    const track = <T>(what: string, p: Promise<T>): Promise<T> =>
      p.then((v) => {
        done[what] = Date.now();
        return v;
      });
    const meta = await c.meta();
    const calls = [
      track('library read', meta.call('GET', '/v1/tables')),
      track('library change', meta.call('POST', '/v1/tables/t/config', { config: { ratio: 2 } })),
      track('ingest through a tablet server', client.ingest('t', rows('a', 50, 10))),
      track('cli read', c.cli(['admin', 'table', 'list'])),
      track('cli change', c.cli(['admin', 'queue', 'create', 'q2'])),
    ];
    const active = logTime(
      await standby.waitForLog((l) => l.msg === 'manager active', c.sessionTimeoutMs + 15_000),
    );
    const results = await Promise.all(calls);
    for (const r of results.slice(3) as { code: number | null; stderr: string }[]) {
      expect(r.code, r.stderr).toBe(0);
    }
    for (const [what, at] of Object.entries(done)) {
      // About a second after the successor is active (target); a call waiting on the paused manager would
      // take its 10 s timeout.
      expect(at - active, what).toBeLessThan(3_000);
    }
    expect(Object.keys(done)).toHaveLength(calls.length);

    // The compactor's long poll moved too: new work is found and committed at once.
    await client.ingest('t', rows('b', 50, 11));
    await client.ingest('t', rows('c', 50, 12));
    const committed = await tserver.waitForLog((l) => l.msg === 'committed' && logTime(l) > active, 10_000);
    expect(logTime(committed) - active).toBeLessThan(4_000);
    expect(compactor.running).toBe(true);

    // Nothing lost, nothing twice: the ingest aborted in flight was read back and sent again.
    const scanned = [];
    for await (const e of client.scan('t')) scanned.push(e.row.toString());
    expect(scanned).toHaveLength(151);

    // The old manager, resumed, is fenced and disturbs nothing: the cluster goes on with its successor.
    old.resume();
    await new Promise((r) => setTimeout(r, c.sessionTimeoutMs));
    const status = await meta.call<{ state: string; epoch: number }>('GET', '/v1/status');
    expect(status).toMatchObject({ state: 'active', epoch: 2 });
  });

  it('failover - a gap with no manager longer than the session timeout is ridden through: the CLI exits 0', async () => {
    const c = cluster();
    const old = await c.startManager({ name: 'manager-1' });
    await c.startTserver();
    await table(c);

    old.kill();
    const running = [
      c.cli(['admin', 'table', 'list']),
      c.cli(['admin', 'queue', 'create', 'q2']),
      c.cli(['ingest', 't'], { input: '{"row":"r1","value":"v"}\n{"row":"r2","value":"v"}\n' }),
    ];
    // Longer than the 5 s a client used to follow a failover for.
    await new Promise((r) => setTimeout(r, 7_000));
    await c.startManager({ name: 'manager-2' });
    for (const r of await Promise.all(running)) expect(r.code, r.stderr).toBe(0);
    const scanned = await c.cli(['scan', 't']);
    expect(scanned.stdout.trim().split('\n')).toHaveLength(3);
  });

  it('failover - when no manager answers in time the CLI exits 2 saying what it tried, never 1', async () => {
    const c = cluster();
    const env = { EXC_MANAGER_FAILOVER_MS: '2000' };
    // No manager at all.
    const none = await c.cli(['admin', 'table', 'list'], { env });
    expect(none.code, none.stderr).toBe(2);
    expect(none.stderr).toMatch(
      /no active manager answered within 2000 ms; tried .*\/manager \(no manager registered/,
    );

    // A manager node naming a manager that never becomes active: it answers NOT_MANAGER.
    const session = await c.session();
    await session.create(c.layout.manager, JSON.stringify({ host: '127.0.0.1', port: 1 }), 'ephemeral');
    const standby = await c.startManager({ name: 'standby', standby: true });
    const url = new URL((await standby.waitForLog((l) => l.msg === 'manager listening')).url as string);
    await session.set(c.layout.manager, JSON.stringify({ host: url.hostname, port: Number(url.port) }));
    const started = Date.now();
    const refused = await c.cli(['admin', 'queue', 'create', 'q'], { env });
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(new RegExp(`tried http://${url.host} \\(NOT_MANAGER: .*standby`));
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
  });
});
