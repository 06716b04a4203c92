/**
 * The garbage collector of a manager that lost the store deletes nothing: paused (SIGSTOP) in the middle
 * of a collection past its session timeout, replaced by the standby, then resumed — and stopped with
 * SIGTERM in the middle of one. Deletes are counted where they happen: at an S3 proxy in front of the
 * manager under test, which holds every delete after the first few for seconds, so the collection is
 * reliably in the middle of its work (every delete it has in flight waiting on the store) when the signal
 * arrives.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEL_PREFIX } from '../../src/meta/keys.js';
import { FaultProxy } from '../support/fault-proxy.js';
import {
  useCluster,
  useProcesses,
  useS3,
  useZooKeeper,
  waitFor,
  type TestCluster,
} from '../support/index.js';

const GRACE_MS = 1_000;
const FILES = 240;
/** Deletes answered promptly before the proxy starts holding them. */
const PROMPT = 20;
const HOLD_MS = 4_000;

describe('garbage collection - fencing', () => {
  const zk = useZooKeeper();
  const s3 = useS3();
  const procs = useProcesses();
  let proxy: FaultProxy;
  beforeEach(async () => {
    proxy = await FaultProxy.start(Number(new URL(s3().endpoint).port));
  });
  afterEach(async () => {
    await proxy.stop();
  });
  const cluster = useCluster(zk, procs, {
    env: () => ({ ...s3().env, EXC_GC_GRACE_MS: String(GRACE_MS) }),
  });

  /**
   * FILES unreferenced objects older than the grace: half marked for deletion (as a commit marks replaced
   * inputs), half crash leftovers that only the sweep finds.
   */
  async function garbage(c: TestCluster): Promise<string[]> {
    const meta = await c.meta();
    const table = await meta.call<{ id: string }>('POST', '/v1/tables', { name: 't' });
    const store = c.store();
    const names = Array.from(
      { length: FILES },
      (_, i) => `tables/${table.id}/Igarbage${String(i).padStart(4, '0')}.rf`,
    );
    for (let i = 0; i < names.length; i += 20) {
      await Promise.all(names.slice(i, i + 20).map((n) => store.write(n, Buffer.from('garbage'))));
    }
    await meta.mutate(
      names
        .filter((_, i) => i % 2 === 0)
        .map((n) => ({
          puts: [{ row: `${DEL_PREFIX}${n}`, col: 'at', value: String(Date.now() - 60_000) }],
        })),
    );
    await new Promise((r) => setTimeout(r, GRACE_MS + 1_000));
    return names;
  }

  /** Starts a collection on the manager at `url` and resolves once every delete it sent is being held. */
  async function collectUntilHeld(c: TestCluster, url: string): Promise<number> {
    proxy.inject({ kind: 'delay', ms: 10 }, { times: PROMPT, method: 'DELETE' });
    proxy.inject({ kind: 'delay', ms: HOLD_MS }, { times: 1_000_000, method: 'DELETE' });
    void c
      .client(url)
      .post('/v1/gc/run', {}, { timeoutMs: 60_000, attempts: 1 })
      .catch(() => undefined);
    let last = -1;
    let stableSince = Date.now();
    return waitFor(
      async () => {
        const n = proxy.count('DELETE');
        if (n !== last) [last, stableSince] = [n, Date.now()];
        return n > PROMPT && Date.now() - stableSince > 300 && n;
      },
      'the collector to have its deletes held by the store',
      20_000,
      20,
    );
  }

  async function remaining(c: TestCluster, names: string[]): Promise<string[]> {
    const store = c.store();
    const left = new Set<string>();
    for await (const o of store.list('tables/')) left.add(o.name);
    return names.filter((n) => left.has(n));
  }

  it('gc - a manager paused mid-collection past its session, replaced, then resumed deletes nothing more', async () => {
    const c = cluster();
    const old = await c.startManager({ name: 'manager-1', env: { EXC_S3_ENDPOINT: proxy.endpoint } });
    const url = (await old.waitForLog((l) => l.msg === 'manager listening')).url as string;
    const standby = await c.startManager({ name: 'manager-2', standby: true });
    const names = await garbage(c);

    const atPause = await collectUntilHeld(c, url);
    const pausedAt = Date.now();
    old.pause();
    await standby.waitForLog((l) => l.msg === 'manager active', c.sessionTimeoutMs + 15_000);
    const atResume = proxy.count('DELETE');
    old.resume();
    // The deletes it had in flight are answered HOLD_MS after they were sent: a collector that went on
    // would send more right then. Wait past that (or for the process to stop, whichever is first).
    const settled = Math.max(0, pausedAt + HOLD_MS + 2_000 - Date.now());
    await Promise.race([old.exit, new Promise((r) => setTimeout(r, settled))]);
    await new Promise((r) => setTimeout(r, 500));
    expect(proxy.count('DELETE') - atResume, 'objects deleted by the resumed manager').toBe(0);
    expect(atResume).toBe(atPause);
    expect(
      old.lines.some((l) =>
        /fenced|stops serving|session lost/.test(`${String(l.msg)} ${String(l.err)} ${String(l.reason)}`),
      ),
    ).toBe(true);

    // What it claimed and did not delete is not stranded: the new manager collects everything.
    const meta = await c.meta();
    await meta.call('POST', '/v1/gc/run');
    expect(await remaining(c, names)).toEqual([]);
    const marks = [];
    for await (const cell of meta.scanAll({ prefix: DEL_PREFIX })) marks.push(cell.row);
    expect(marks).toEqual([]);
  });

  it('gc - SIGTERM in the middle of a collection aborts it: the manager exits at once and deletes nothing more', async () => {
    const c = cluster();
    const manager = await c.startManager({ env: { EXC_S3_ENDPOINT: proxy.endpoint } });
    const url = (await manager.waitForLog((l) => l.msg === 'manager listening')).url as string;
    const names = await garbage(c);

    const atStop = await collectUntilHeld(c, url);
    const started = Date.now();
    manager.signal('SIGTERM');
    const exit = await manager.waitExit(HOLD_MS + 10_000).catch(() => 'still running');
    const tookMs = Date.now() - started;
    await new Promise((r) => setTimeout(r, 500));
    expect(proxy.count('DELETE') - atStop, 'objects deleted after SIGTERM').toBe(0);
    expect(exit).toEqual({ code: 0, signal: null });
    // Well under the time the held deletes take to be answered: the cycle is aborted, not waited for.
    expect(tookMs).toBeLessThan(HOLD_MS);
    expect((await remaining(c, names)).length).toBeGreaterThan(0);
  });
});
