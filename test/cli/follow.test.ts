/**
 * Following and accounting for compactions from the CLI: a user compaction followed by its id
 * (`admin compactions status <id> [--wait]`) through selection, a failed attempt and its commit; a cancel
 * of what already ended says how it ended; the history shows bytes and errors; and the counts exported
 * as metrics survive a manager restart and the trimming of the outcome rows they were counted from.
 */
import { describe, expect, it } from 'vitest';
import { ExcClient, type ClientEntry } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import type { HistoryAnswer } from '../../src/meta/outcomes.js';
import type { UserCompactionStatus } from '../../src/meta/user-compactions.js';
import { TestCompactor, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';
import type { TestCluster } from '../support/index.js';
import { cliJson, cliOk } from '../support/cli.js';

function batch(prefix: string, ts: number): ClientEntry[] {
  return Array.from({ length: 20 }, (_, i) => ({ row: `${prefix}${i}`, ts, value: 'v'.repeat(50) }));
}

/** The manager's `excompact_compactions_ended_total` samples, as `outcome/reason` → value. */
async function endedMetrics(c: TestCluster): Promise<Record<string, number>> {
  const text = await (await fetch(`${await c.managerUrl()}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('excompact_compactions_ended_total{')) continue;
    const outcome = /outcome="([^"]*)"/.exec(line)?.[1];
    const reason = /reason="([^"]*)"/.exec(line)?.[1];
    const kind = /kind="([^"]*)"/.exec(line)?.[1];
    const queue = /queue="([^"]*)"/.exec(line)?.[1];
    out[`${queue}/${kind}/${outcome}/${reason}`] = Number(line.split(' ').pop());
  }
  return out;
}

describe('following compactions', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);

  it('status by id, --wait re-attached, cancel of what ended, history with bytes and errors, metrics across a restart', async () => {
    const c = cluster();
    const manager = await c.startManager();
    await c.startTserver();
    await cliOk(c, ['admin', 'queue', 'create', 'q']);
    const meta = await c.meta();
    await meta.call('POST', '/v1/tables', { name: 'events', config: { queues: [{ queue: 'q' }] } });
    const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger(), moveTimeoutMs: 20_000 });
    const [tablet] = await waitFor(async () => {
      const t = await client.tablets('events');
      return t.every((x) => x.loc) && t;
    }, 'the tablet to be hosted');
    for (let i = 0; i < 2; i++) await client.ingest('events', batch(`a${i}-`, 10 + i));

    // The request prints its id, and how to follow it.
    const requested = await cliOk(c, ['admin', 'table', 'compact', 'events']);
    const id = /compaction (\w{26}) requested/.exec(requested)?.[1] as string;
    expect(requested).toContain(`excompact admin compactions status ${id} --wait`);
    const status = () => cliJson<UserCompactionStatus>(c, ['admin', 'compactions', 'status', id, '--json']);
    expect((await status()).tablets).toMatchObject([{ tablet: tablet!.tablet, state: 'selected' }]);

    // A first attempt fails: seen running, then counted with its error.
    const held = await TestCompactor.start(c, 'q');
    const job = (await held.reserve(tablet!.tablet))!;
    expect(job.kind).toBe('user');
    expect((await status()).tablets[0]).toMatchObject({ state: 'running', ecid: job.ecid });
    await held.fail(job, 'boom: the disk is on fire');
    await held.close();
    expect((await status()).tablets[0]).toMatchObject({ state: 'selected', failedAttempts: 1 });
    expect((await status()).tablets[0]!.lastError).toContain('boom');
    const cancelFailed = await c.cli(['admin', 'compactions', 'cancel', job.ecid]);
    expect(cancelFailed.code).toBe(0);
    expect(cancelFailed.stdout).toMatch(/had already ended: failed .*boom/);

    // Another shell re-attaches by id and returns when it is done.
    await c.startCompactor('q');
    const waited = await cliOk(c, ['admin', 'compactions', 'status', id, '--wait']);
    expect(waited).toContain('1/1 tablets done (finished)');
    const done = await status();
    expect(done.done).toBe(true);
    expect(done.tablets[0]).toMatchObject({ state: 'done', failedAttempts: 1 });
    const committed = done.tablets[0]!.ecid!;
    const cancelDone = await c.cli(['admin', 'compactions', 'cancel', committed]);
    expect(cancelDone.code).toBe(0);
    expect(cancelDone.stdout).toMatch(/had already ended: committed/);
    const unknown = await c.cli(['admin', 'compactions', 'status', '01ARZ3NDEKTSV4RRFFQ69G5FAV']);
    expect(unknown.code).not.toBe(0);

    // History: durations, bytes and errors.
    const history = await cliJson<HistoryAnswer>(c, ['admin', 'compactions', 'history', '--queue', 'q']);
    const commit = history.outcomes.find((o) => o.ecid === committed)!;
    expect(commit).toMatchObject({ outcome: 'committed', kind: 'user', userCompactionIds: [id] });
    expect(commit.inputBytes).toBeGreaterThan(0);
    expect(commit.outputBytes).toBeGreaterThan(0);
    const text = await cliOk(c, ['admin', 'compactions', 'history']);
    expect(text).toContain('boom');
    expect(text).toMatch(/B->\d/);

    const before = await endedMetrics(c);
    expect(before).toMatchObject({ 'q/user/committed/': 1, 'q/user/cancelled/failed': 1 });

    // A new manager that trims every outcome row at once: the counts stay.
    manager.kill();
    await c.startManager({
      name: 'manager-2',
      env: { EXC_OUTCOME_RETENTION_MS: '0', EXC_GC_INTERVAL_MS: '200' },
    });
    await waitFor(
      async () =>
        (await cliJson<HistoryAnswer>(c, ['admin', 'compactions', 'history'])).outcomes.length === 0,
      'the outcome rows to be trimmed',
      30_000,
      500,
    );
    expect(await endedMetrics(c)).toEqual(before);
  });
});
