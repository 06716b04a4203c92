/**
 * `npm start` (`excompact local`): the whole local cluster starts, compacts the demo workload across both
 * queues, prints its summary, and stops cleanly; a killed supervisor leaves nothing behind. With
 * `--postgres`, the metadata lives in an embedded PostgreSQL, stopped with the rest.
 */
import { chmodSync } from 'node:fs';
import { createConnection } from 'node:net';
import { describe, expect, it } from 'vitest';
import { fourLetterWord, freePort } from '../../src/zk/embedded.js';
import { useProcesses, waitFor, type ManagedProcess } from '../support/index.js';
import { useTempDirs } from '../support/temp-dirs.js';

async function zkAnswers(port: number): Promise<boolean> {
  return fourLetterWord(port, 'ruok', 500).then(
    (answer) => answer === 'imok',
    () => false,
  );
}

async function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function httpAnswers(url: string): Promise<boolean> {
  return fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
    () => true,
    () => false,
  );
}

describe('npm start (excompact local)', () => {
  const procs = useProcesses();
  const freshDir = useTempDirs('local');

  async function startLocal(extra: string[] = []): Promise<{
    proc: ManagedProcess;
    zkPort: number;
    managerUrl: string;
  }> {
    const dir = freshDir();
    chmodSync(dir, 0o755); // PostgreSQL (--postgres) runs as the postgres user and must reach its files
    const zkPort = await freePort();
    const proc = await procs.start(
      'local',
      ['local', '--data-dir', dir, '--zk-port', String(zkPort), '--summary-every', '500', ...extra],
      {
        env: { EXC_SECRET: undefined, EXC_ZK: undefined, EXC_LOG_LEVEL: 'info' },
      },
    );
    await proc.waitForLog((l) => /excompact local: ready/.test(l.msg ?? ''), 60_000);
    const managerUrl = /manager +(http:\/\/\S+)/.exec(proc.lines.map((l) => l.msg).join('\n'))![1]!;
    return { proc, zkPort, managerUrl };
  }

  it('runs a manager, two tablet servers, two queues with two compactors each; compactions happen on both queues; Ctrl-C stops it all', async () => {
    const { proc, zkPort, managerUrl } = await startLocal();
    expect(proc.lines.map((l) => l.msg).join('\n')).toMatch(
      /tserver-1[\s\S]*tserver-2[\s\S]*compactors +2 for small, 2 for large/,
    );
    // npm start serves the monitor page and prints its address; the page's data has both queues.
    const monitorUrl = /monitor +(http:\/\/127\.0\.0\.1:\d+\/)/.exec(
      proc.lines.map((l) => l.msg).join('\n'),
    )![1]!;
    expect(await (await fetch(monitorUrl)).text()).toContain('<title>excompact monitor</title>');
    const state = (await (await fetch(`${monitorUrl}api/state`)).json()) as {
      snapshot: { queues: { name: string }[] };
    };
    expect(state.snapshot.queues.map((q) => q.name).sort()).toEqual(['large', 'small']);
    // The summary reports completed compactions for both queues.
    await proc.waitForLog((l) => /^large +\d+ +\d+ +[1-9]\d* +(?:-|\d+\.\d) +2$/.test(l.msg ?? ''), 60_000);
    await proc.waitForLog((l) => /^small +\d+ +\d+ +[1-9]\d* +(?:-|\d+\.\d) +2$/.test(l.msg ?? ''), 60_000);

    proc.signal('SIGINT'); // what Ctrl-C sends
    expect(await proc.waitExit(60_000)).toEqual({ code: 0, signal: null });
    expect(proc.lines.some((l) => l.msg === 'excompact local: stopped')).toBe(true);
    expect(await zkAnswers(zkPort)).toBe(false);
    expect(await httpAnswers(managerUrl)).toBe(false);
    expect(await httpAnswers(monitorUrl)).toBe(false);
  });

  it('--postgres keeps the metadata in an embedded PostgreSQL; compactions happen; Ctrl-C stops it too', async () => {
    const { proc, zkPort } = await startLocal(['--postgres']);
    const metaLine = proc.lines.map((l) => l.msg ?? '').find((m) => m.includes('metadata '))!;
    // Shown without its user and password (they never appear in output).
    expect(metaLine).toMatch(/postgres:\/\/127\.0\.0\.1:\d+\/excompact \(embedded PostgreSQL\)/);
    const pgPort = Number(/127\.0\.0\.1:(\d+)/.exec(metaLine)![1]);
    await proc.waitForLog((l) => /^small +\d+ +\d+ +[1-9]\d* +(?:-|\d+\.\d) +2$/.test(l.msg ?? ''), 60_000);
    proc.signal('SIGINT');
    expect(await proc.waitExit(60_000)).toEqual({ code: 0, signal: null });
    expect(await zkAnswers(zkPort)).toBe(false);
    expect(await portAnswers(pgPort)).toBe(false);
  });

  it('--s3 keeps the files in an embedded S3 server; a SIGKILLed supervisor leaves no process behind', async () => {
    const { proc, zkPort, managerUrl } = await startLocal(['--s3']);
    const storeLine = proc.lines.map((l) => l.msg ?? '').find((m) => m.includes('object store'))!;
    expect(storeLine).toMatch(/s3:\/\/excompact\/data \(embedded S3 server at http:\/\/127\.0\.0\.1:\d+\)/);
    const s3 = /at (http:\/\/\S+)\)/.exec(storeLine)![1]!;
    await proc.waitForLog((l) => /^small +\d+ +\d+ +[1-9]\d* +(?:-|\d+\.\d) +2$/.test(l.msg ?? ''), 60_000);
    proc.kill();
    await waitFor(async () => !(await httpAnswers(s3)), 'the S3 server to go', 15_000, 200);
    await waitFor(
      async () => !(await zkAnswers(zkPort)) && !(await httpAnswers(managerUrl)),
      'ZooKeeper and the manager to go',
      15_000,
      200,
    );
  });
});
