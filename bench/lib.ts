/**
 * Shared pieces of the cluster benchmarks: a real ZooKeeper and real processes (the test harness's process
 * group, which has no test-framework dependency), statistics, and the output table and number format.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../src/log.js';
import { MetaClient } from '../src/meta/client.js';
import { RpcClient } from '../src/rpc/client.js';
import {
  ZkLayout,
  ZkSession,
  digestAuthFromSecret,
  startEmbeddedZooKeeper,
  type EmbeddedZooKeeper,
} from '../src/zk/index.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../test/support/ensemble.js';
import { ProcessGroup, type ManagedProcess } from '../test/support/process-group.js';

export interface BenchCluster {
  /** The single embedded server, or (with `ensemble: true`) the first member of the ensemble. */
  zk: Pick<EmbeddedZooKeeper, 'connectString' | 'stop'>;
  /** The three-server ensemble, when asked for. */
  ensemble?: ZooKeeperEnsemble;
  dir: string;
  secret: string;
  root: string;
  layout: ZkLayout;
  env: Record<string, string>;
  procs: ProcessGroup;
  session: ZkSession;
  meta: MetaClient;
  start(name: string, args: string[], ready: string, env?: Record<string, string>): Promise<ManagedProcess>;
  client(url: string): RpcClient;
  stop(): Promise<void>;
}

export async function startBenchCluster(
  options: { sessionTimeoutMs?: number; env?: Record<string, string>; ensemble?: boolean } = {},
): Promise<BenchCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'exc-bench-'));
  const ensemble = options.ensemble ? await startZooKeeperEnsemble({ dir: join(dir, 'zk') }) : undefined;
  const zk = ensemble
    ? { connectString: ensemble.connectString, stop: () => ensemble.stop() }
    : await startEmbeddedZooKeeper({
        dataDir: join(dir, 'zk'),
        tickTimeMs: 100,
        minSessionTimeoutMs: 200,
        maxSessionTimeoutMs: 20_000,
      });
  const secret = 'bench-secret-0123456789abcdef';
  const root = '/bench';
  const env: Record<string, string> = {
    EXC_ZK: zk.connectString,
    EXC_ZK_ROOT: root,
    EXC_SECRET: secret,
    EXC_ZK_SESSION_TIMEOUT_MS: String(options.sessionTimeoutMs ?? 2_000),
    EXC_DATA_DIR: join(dir, 'manager'),
    EXC_STORE: `file://${join(dir, 'store')}`,
    EXC_LOG_LEVEL: 'info',
    EXC_GC_INTERVAL_MS: '3600000',
    ...options.env,
  };
  const procs = new ProcessGroup();
  const layout = new ZkLayout(root);
  const session = await ZkSession.connect({
    connectString: zk.connectString,
    sessionTimeoutMs: 10_000,
    auth: digestAuthFromSecret(secret),
  });
  const meta = new MetaClient({ session, layout, secret, logger: silentLogger(), failoverMs: 30_000 });
  return {
    zk,
    ...(ensemble ? { ensemble } : {}),
    dir,
    secret,
    root,
    layout,
    env,
    procs,
    session,
    meta,
    start: (name, args, ready, extra = {}) =>
      procs.start(name, args, {
        env: { ...env, EXC_LOG_LEVEL: 'info', ...extra },
        readyWhen: (l) => l.msg === ready,
        readyTimeoutMs: 60_000,
      }),
    client: (url) => new RpcClient({ baseUrl: url, secret, timeoutMs: 30_000, attempts: 1 }),
    stop: async () => {
      await procs.stopAll();
      await session.close();
      await zk.stop();
      procs.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Runs `fn` from `concurrency` loops for `ms`; resolves with completed calls per second. */
export async function throughput(
  concurrency: number,
  ms: number,
  fn: (loop: number, i: number) => Promise<unknown>,
): Promise<{ perSecond: number; calls: number }> {
  const deadline = Date.now() + ms;
  let calls = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      for (let i = 0; Date.now() < deadline; i++) {
        await fn(loop, i);
        calls++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { perSecond: calls / seconds, calls };
}

export interface Row {
  figure: string;
  value: string;
  baseline?: string;
  ratio?: string;
  target?: string;
}

/** A Markdown table with aligned columns. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${widths.map((w, i) => (cells[i] ?? '').padEnd(w)).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...rows.map(line)].join('\n');
}

export function printRows(title: string, rows: Row[]): void {
  const header = ['figure', 'value', 'baseline (same run)', 'ratio', 'target'];
  const cells = rows.map((r) => [r.figure, r.value, r.baseline ?? '', r.ratio ?? '', r.target ?? '']);
  process.stdout.write(`\n${title}\n\n${table(header, cells)}\n`);
}

export const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
