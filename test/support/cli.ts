/**
 * The `excompact` CLI as a test uses it when the command is expected to succeed: its output, or a failure
 * that shows the command, its exit code and what it printed to stderr.
 *
 *   await cliOk(cluster, ['admin', 'queue', 'create', 'small']);
 *   const queues = await cliJson<{ name: string }[]>(cluster, ['admin', 'queue', 'list']);
 */
import type { TestCluster } from './cluster.js';

/** Runs `excompact <args>` (with `input` on stdin) against the cluster; its stdout once it exits 0. */
export async function cliOk(cluster: TestCluster, args: string[], input?: string): Promise<string> {
  const r = await cluster.cli(args, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`excompact ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Runs `excompact <args> --json` against the cluster and parses what it prints. */
export async function cliJson<T>(cluster: TestCluster, args: string[]): Promise<T> {
  return JSON.parse(await cliOk(cluster, [...args, '--json'])) as T;
}
