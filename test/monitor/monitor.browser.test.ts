/**
 * The monitor page in a real browser: Debian's Chromium, headless, driven by playwright-core (which
 * downloads nothing: it is pointed at /usr/bin/chromium, installed by scripts/setup.mjs), against a real
 * cluster — ZooKeeper, a manager, a tablet server, a compactor slowed down so its job can be watched —
 * and `excompact monitor` as a user runs it.
 *
 * The page loads, shows both queues and the running compaction (and charts a queue named `constructor`
 * created later without NaN), its cancel button (after the confirmation) cancels that compaction, and the
 * page follows the job run again to its commit. A parked user job shows with release and cancel buttons,
 * and cancel cancels it. No console error along the way.
 * Screenshots go to test-artifacts/monitor/.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import type { HistoryAnswer } from '../../src/meta/outcomes.js';
import type { RunningCompaction } from '../../src/meta/views.js';
import { createQueue } from '../../src/queue/registry.js';
import { cliJson, cliOk } from '../support/cli.js';
import { TestCompactor, useCluster, useProcesses, useZooKeeper, waitFor } from '../support/index.js';

const CHROMIUM = process.env.EXC_CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-artifacts', 'monitor');

/** Random values: the files do not compress, so the throttled compactor takes seconds over them. */
function batch(ts: number) {
  return Array.from({ length: 150 }, (_, i) => ({
    row: `r${String(i).padStart(4, '0')}`,
    ts,
    value: randomBytes(300).toString('hex'),
  }));
}

describe('monitor page', () => {
  const zk = useZooKeeper();
  const procs = useProcesses();
  const cluster = useCluster(zk, procs);
  let browser: Browser | undefined;
  afterAll(async () => {
    await browser?.close();
  });

  it('monitor - shows queues and a running compaction, cancel cancels it, follows it to its commit', async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `no browser at ${CHROMIUM}: run \`node scripts/setup.mjs\` (it installs Debian's chromium)`,
      );
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    const c = cluster();
    const s = await c.startWithTable({ table: 'events', queue: 'small' });
    await createQueue(await c.session(), c.layout, 'large', 2);
    // ~250 KB per job read at 60 KB/s: a job runs for about 4 s.
    await c.startCompactor('small', { args: ['--throughput', '60000', '--progress-every', '100'] });
    const monitor = await c.start('monitor', ['monitor', '--port', '0'], {
      readyWhen: (l) => l.msg === 'monitor listening',
    });
    const url = (await monitor.waitForLog((l) => l.msg === 'monitor listening')).url as string;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const page: Page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    await page.goto(url);

    // Both queues, live.
    await page.locator('#queues tr[data-key="small"]').waitFor();
    await page.locator('#queues tr[data-key="large"]').waitFor();
    await expect.poll(() => page.locator('#status').textContent()).toMatch(/^live/);
    await page.screenshot({ path: join(ARTIFACTS, '1-queues.png'), fullPage: true });

    // A queue named like a member of every object (`constructor` is a valid name), created after the page
    // has samples: those lack it, and the depth chart must read 0 there, not the inherited function (NaN).
    await createQueue(await c.session(), c.layout, 'constructor', 1);
    await page.locator('#chart-depth polyline[data-series="constructor"]').waitFor({ state: 'attached' });
    const depth = page.locator('#chart-depth');
    expect(await depth.locator('text').textContent()).toMatch(/^max 1 /);
    const lines = await depth.locator('polyline').all();
    const points = await Promise.all(lines.map((l) => l.getAttribute('points')));
    expect(points).toHaveLength(3);
    for (const p of points) expect(p).toMatch(/^[\d.]+,[\d.]+( [\d.]+,[\d.]+)*$/);

    // Three files on the tablet: a compaction is selected and the slow compactor runs it.
    for (let ts = 1; ts <= 3; ts++) await s.client.ingest('events', batch(ts));
    const running = await waitFor(async () => {
      const { running } = await s.meta.call<{ running: RunningCompaction[] }>('GET', '/v1/compactions');
      return running[0];
    }, 'a running compaction');
    const row = page.locator(`#running tr[data-key="${running.ecid}"]`);
    await row.waitFor({ timeout: 10_000 });
    await expect.poll(() => row.textContent()).toContain('events');
    await expect.poll(() => page.locator('#compactors tbody tr').first().textContent()).toContain('small@');
    await page.screenshot({ path: join(ARTIFACTS, '2-running.png'), fullPage: true });

    // Cancel, through the confirmation: the first answer ("Keep it") changes nothing.
    await row.locator('button').click();
    await page.locator('#confirm').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, '3-confirm.png'), fullPage: true });
    await page.locator('#confirm-yes').click();
    const ended = await waitFor(async () => {
      const h = await s.meta.call<HistoryAnswer>('GET', '/v1/compactions/history?limit=10');
      return h.outcomes.find((o) => o.ecid === running.ecid);
    }, `compaction ${running.ecid} to end`);
    expect(ended).toMatchObject({ outcome: 'cancelled', reason: 'admin' });
    await row.waitFor({ state: 'detached', timeout: 10_000 });

    // The tablet queues the work again; the page follows the new job to its commit: one file left.
    const tabletRow = page.locator('#tablets tbody tr').first();
    await expect.poll(() => tabletRow.locator('td').nth(2).textContent(), { timeout: 30_000 }).toBe('1');
    await expect
      .poll(() => page.locator('#queues tr[data-key="small"] td').nth(5).textContent(), { timeout: 10_000 })
      .toBe('1');
    await expect.poll(() => page.locator('#running tbody tr.empty').count()).toBe(1);
    await page.screenshot({ path: join(ARTIFACTS, '4-committed.png'), fullPage: true });

    // A parked user job (table `logs` on queue `large`: a test compactor fails its job once, which parks
    // it at maxAttempts=1) shows with both buttons; cancel cancels that user compaction on its tablet.
    await cliOk(c, [
      'admin',
      'table',
      'create',
      'logs',
      '--config',
      'queues=large',
      '--config',
      'maxAttempts=1',
    ]);
    for (let ts = 1; ts <= 3; ts++) await s.client.ingest('logs', batch(ts));
    const { id } = await cliJson<{ id: string }>(c, ['admin', 'table', 'compact', 'logs', '--json']);
    const failing = await TestCompactor.start(c, 'large');
    const logsTablet = (
      await cliJson<{ tablets: { tablet: string }[] }>(c, ['admin', 'table', 'info', 'logs'])
    ).tablets[0]!.tablet;
    const job = await waitFor(() => failing.reserve(logsTablet), 'the user job of logs');
    expect(job.kind).toBe('user');
    await failing.fail(job, 'failed on purpose');
    await failing.close();
    const parkedRow = page.locator('#parked tbody tr').filter({ hasText: 'logs' });
    await parkedRow.waitFor({ timeout: 10_000 });
    await expect.poll(() => parkedRow.textContent()).toContain(`user ${id}`);
    await page.screenshot({ path: join(ARTIFACTS, '5-parked.png'), fullPage: true });
    await parkedRow.locator('button', { hasText: 'Cancel' }).click();
    await page.locator('#confirm-yes').click();
    await parkedRow.waitFor({ state: 'detached', timeout: 10_000 });
    const status = await cliJson<{ tablets: { state: string }[] }>(c, [
      'admin',
      'compactions',
      'status',
      id,
      '--json',
    ]);
    expect(status.tablets.map((t) => t.state)).toEqual(['cancelled']);

    // Refused without the page's header, and from a name other than localhost (DNS rebinding).
    const forged = await fetch(`${url}api/compactions/${running.ecid}/cancel`, { method: 'POST' });
    expect(forged.status).toBe(403);
    // (fetch would not send another Host: plain http does.)
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = request(`${url}api/state`, { headers: { host: 'evil.example' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(rebound).toBe(403);
    expect(problems).toEqual([]);
  });
});
