/**
 * Usage errors the CLI finds before it reaches any cluster: exit 1 with one line naming what to change.
 * No ZooKeeper is running (EXC_ZK points at a closed port), so a command that tried to connect first would
 * exit 2 instead.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/index.js';

const env = {
  EXC_ZK: '127.0.0.1:1',
  EXC_SECRET: 'a-secret-of-more-than-16-chars',
  EXC_SECRET_FILE: undefined,
};

describe('cli usage errors', () => {
  it('monitor - a short EXC_MONITOR_TOKEN with --allow-remote is named, before connecting to ZooKeeper', async () => {
    const r = await runCli(['monitor', '--host', '0.0.0.0', '--allow-remote', '--port', '0'], {
      env: { ...env, EXC_MONITOR_TOKEN: 'short' },
      timeoutMs: 20_000,
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/EXC_MONITOR_TOKEN must be at least 16 characters/);
    expect(r.stderr).not.toMatch(/ZooKeeper/);
  });

  it('admin compactions release - with neither an id nor --table, says to give one (not "not both")', async () => {
    const none = await runCli(['admin', 'compactions', 'release'], { env, timeoutMs: 20_000 });
    expect(none.code, none.stderr).toBe(1);
    expect(none.stderr.trim()).toBe('excompact: BAD_REQUEST: give a parked job id or --table');
    const both = await runCli(
      ['admin', 'compactions', 'release', '3f9c2a1b0d4e5f60718293a4', '--table', 't'],
      {
        env,
        timeoutMs: 20_000,
      },
    );
    expect(both.code, both.stderr).toBe(1);
    expect(both.stderr.trim()).toBe('excompact: BAD_REQUEST: give a parked job id or --table, not both');
  });

  it('an empty table, queue or id is named before connecting (found by the fuzz suite: `table info ""` crashed)', async () => {
    const cases: [string[], RegExp][] = [
      [['admin', 'table', 'info', ''], /the table name must not be empty/],
      [['admin', 'table', 'delete', ''], /the table name must not be empty/],
      [['admin', 'table', 'compact', ''], /the table name must not be empty/],
      [['admin', 'queue', 'info', ''], /the queue name must not be empty/],
      [['admin', 'queue', 'delete', ''], /the queue name must not be empty/],
      [['admin', 'compactions', 'status', ''], /the id must not be empty/],
      [['admin', 'compactors', 'list', '--queue', ''], /--queue must not be empty/],
      [['scan', ''], /the table name must not be empty/],
    ];
    await Promise.all(
      cases.map(async ([args, message]) => {
        const r = await runCli(args, { env, timeoutMs: 20_000 });
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
        expect(r.stderr, args.join(' ')).toMatch(message);
      }),
    );
  });

  it('health - a --port that is not a port is a usage error (exit 1), not an unhealthy process', async () => {
    for (const port of ['abc', '0', '65536', '1.5']) {
      const r = await runCli(['health', '--port', port], { env, timeoutMs: 20_000 });
      expect(r.code, `${port}: ${r.stderr}`).toBe(1);
      expect(r.stderr, port).toMatch(/--port must be an integer from 1 to 65535/);
    }
  });
});
