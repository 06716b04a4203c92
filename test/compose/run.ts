/**
 * Running commands for the compose test: every command and its output goes to one log file (printed
 * when the test fails), failures carry a stable code, and every wait has a deadline.
 */
import { spawn, type SpawnOptions } from 'node:child_process';
import { appendFileSync } from 'node:fs';

/** A failure of the compose test. `code` is stable (CI and people grep for it); the message says what. */
export class ComposeTestError extends Error {
  constructor(
    readonly code:
      | 'UNAVAILABLE' // no Docker daemon and none can be started here (the test is skipped in CI)
      | 'SETUP' // installing or starting what the test needs failed
      | 'BUILD' // building an image failed
      | 'COMMAND' // a docker or compose command failed
      | 'TIMEOUT' // something did not happen in time
      | 'SCENARIO', // the cluster did not behave as the README promises
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export interface RunOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
  /** Resolve with the exit code instead of throwing when it is not 0. */
  allowFailure?: boolean;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

let logFile: string | undefined;
const started = Date.now();

/** Where every command and its output is recorded. */
export function setLogFile(path: string): void {
  logFile = path;
}

export function log(line: string): void {
  if (logFile) appendFileSync(logFile, `${line}\n`);
}

/** A progress line on stdout (and in the log), with the time since the test started. */
export function say(line: string): void {
  const text = `[compose ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${line}`;
  process.stdout.write(`${text}\n`);
  log(text);
}

/** Runs `command args`, collecting its output; throws COMMAND (or TIMEOUT) unless told otherwise. */
export function run(command: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  const shown = [command, ...args].join(' ');
  log(`$ ${shown}`);
  const spawnOptions: SpawnOptions = { env: options.env ?? process.env, cwd: options.cwd };
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...spawnOptions, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timeoutMs = options.timeoutMs ?? 120_000;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new ComposeTestError('TIMEOUT', `${shown}: no answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new ComposeTestError('COMMAND', `${shown}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = {
        code: code ?? 128,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
      };
      if (result.stdout) log(result.stdout.trimEnd());
      if (result.stderr) log(result.stderr.trimEnd());
      log(`(exit ${code ?? signal} after ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      if (result.code !== 0 && !options.allowFailure) {
        const tail = (result.stderr || result.stdout).trim().split('\n').slice(-5).join('\n  ');
        reject(new ComposeTestError('COMMAND', `${shown} exited ${code ?? signal}:\n  ${tail}`));
      } else resolve(result);
    });
    child.stdin.on('error', () => undefined); // a command that exits without reading its input
    child.stdin.end(options.input ?? '');
  });
}

/** Runs `command args`, streaming a shell pipeline's stdin from `producer` (a tar of a directory). */
export function pipe(
  producer: [string, string[]],
  consumer: [string, string[]],
  timeoutMs: number,
): Promise<RunResult> {
  log(`$ ${producer.join(' ')} | ${consumer.join(' ')}`);
  return new Promise((resolve, reject) => {
    const source = spawn(producer[0], producer[1], { stdio: ['ignore', 'pipe', 'pipe'] });
    const sink = spawn(consumer[0], consumer[1], { stdio: ['pipe', 'pipe', 'pipe'] });
    source.stdout.pipe(sink.stdin);
    let errors = '';
    source.stderr.on('data', (b: Buffer) => (errors += b.toString()));
    sink.stderr.on('data', (b: Buffer) => (errors += b.toString()));
    let stdout = '';
    sink.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    const timer = setTimeout(() => {
      source.kill('SIGKILL');
      sink.kill('SIGKILL');
      reject(
        new ComposeTestError('TIMEOUT', `${consumer.join(' ')}: no answer within ${timeoutMs / 1000} s`),
      );
    }, timeoutMs);
    let sourceCode: number | null = null;
    source.on('close', (code) => (sourceCode = code));
    sink.on('close', (code) => {
      clearTimeout(timer);
      log(stdout.trimEnd());
      if (errors) log(errors.trimEnd());
      if (code !== 0 || sourceCode !== 0)
        reject(
          new ComposeTestError('COMMAND', `${producer[0]} | ${consumer.join(' ')} failed: ${errors.trim()}`),
        );
      else resolve({ code: 0, stdout, stderr: errors });
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `probe` until it returns a value (not undefined) or `timeoutMs` passes; then throws TIMEOUT with
 * `what` and the last thing the probe saw.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  everyMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline)
      throw new ComposeTestError(
        'TIMEOUT',
        `${what}: not within ${timeoutMs / 1000} s${last ? ` (${last})` : ''}`,
      );
    await sleep(everyMs);
  }
}
