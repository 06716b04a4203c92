/**
 * The command line loads what a command uses, when it uses it: `--help` and the definition of every command
 * load no server code and no client stack, and a client command (admin, ingest, scan) loads the client
 * stack but nothing of the servers (their HTTP framework, the S3 SDK, SQLite, metrics, pino). This is what
 * keeps an admin command at operator speed (bench/cli.ts measures it); a static import of a heavy module
 * in a command's module would undo it silently, and this test fails instead.
 *
 * Every module the process resolves is recorded by a module resolution hook registered before the CLI
 * starts.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dirs.js';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/excompact.js', import.meta.url));
const HOOK = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.EXC_TRACE_FILE, result.url + '\\n');
  return result;
}`;
const REGISTER = `import { register } from 'node:module';
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOK)}`)});`;

const SERVER_SIDE = [
  'node_modules/express/',
  'node_modules/@aws-sdk/',
  'node_modules/better-sqlite3/',
  'node_modules/prom-client/',
  'node_modules/pino/',
  '/dist/manager/',
  '/dist/tserver/',
  '/dist/compactor/compactor.js',
  '/dist/storage/',
];
const CLIENT_STACK = ['node_modules/node-zookeeper-client/', '/dist/zk/', '/dist/rpc/'];

const freshDir = useTempDirs('lazy');

let n = 0;
/** The modules `excompact <args>` resolved, and how it exited. */
function loadedBy(
  args: string[],
  env: Record<string, string> = {},
  entry = CLI,
): { modules: string[]; status: number | null } {
  const trace = join(freshDir(), `trace-${n++}`);
  const r = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`, entry, ...args],
    { env: { ...process.env, ...env, EXC_TRACE_FILE: trace }, encoding: 'utf8', timeout: 30_000 },
  );
  const modules = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  return { modules, status: r.status };
}

const matching = (modules: string[], patterns: string[]): string[] =>
  modules.filter((m) => patterns.some((p) => m.includes(p)));

describe('what each command loads', () => {
  it.each([
    [['--help']],
    [['admin', '--help']],
    [['admin', 'queue', 'list', '--help']],
    [['compactor', '--help']],
    [['manager', '--help']],
    [['ingest', '--help']],
  ])('excompact %j loads neither server code nor the client stack', (args) => {
    const { modules, status } = loadedBy(args);
    expect(status).toBe(0);
    expect(modules.some((m) => m.endsWith('/dist/cli/program.js'))).toBe(true);
    expect(matching(modules, [...SERVER_SIDE, ...CLIENT_STACK])).toEqual([]);
  });

  it('a client command loads the client stack and nothing of the servers', () => {
    // Nothing listens on port 1: the command loads what it needs, fails to connect and exits 2.
    const { modules, status } = loadedBy(['admin', 'queue', 'list'], {
      EXC_ZK: '127.0.0.1:1',
      EXC_SECRET: 'lazy-load-test-secret-0123456789',
    });
    expect(status).toBe(2);
    expect(matching(modules, CLIENT_STACK).length).toBeGreaterThan(0);
    expect(matching(modules, SERVER_SIDE)).toEqual([]);
    // The RPC client rides on Node's own http module: no HTTP library to load.
    expect(matching(modules, ['node_modules/undici/'])).toEqual([]);
  });
});

describe('the installed command (bin/excompact.js)', () => {
  const UNREACHABLE = { EXC_ZK: '127.0.0.1:1', EXC_SECRET: 'lazy-load-test-secret-0123456789' };
  const fromDist = (modules: string[]): string[] => matching(modules, ['/dist/cli/']);
  const fromBundle = (modules: string[]): string[] => matching(modules, ['/dist/bundle/']);

  it('runs the commands an operator types from the bundle: a few files, nothing compiled one by one', () => {
    for (const args of [['--help'], ['admin', 'queue', 'list'], ['scan', 't']]) {
      const { modules, status } = loadedBy(args, UNREACHABLE, BIN);
      expect(status, args.join(' ')).toBe(args[0] === '--help' ? 0 : 2);
      expect(fromBundle(modules).length, args.join(' ')).toBeGreaterThan(0);
      expect(fromDist(modules), args.join(' ')).toEqual([]);
      expect(matching(modules, ['node_modules/zod/', 'node_modules/node-zookeeper-client/'])).toEqual([]);
    }
  });

  it('runs the long-running processes from the compiled modules, never the bundle', () => {
    for (const args of [
      ['manager', '--help'],
      ['compactor', '--help'],
      ['local', '--help'],
    ]) {
      const { modules, status } = loadedBy(args, {}, BIN);
      expect(status, args.join(' ')).toBe(0);
      expect(fromDist(modules).length, args.join(' ')).toBeGreaterThan(0);
      expect(fromBundle(modules), args.join(' ')).toEqual([]);
    }
  });
});
