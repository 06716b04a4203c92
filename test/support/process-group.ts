/**
 * The project's real processes as children of a test or a benchmark: spawn, wait until ready, SIGKILL,
 * SIGSTOP/SIGCONT, SIGTERM with a wait for the exit code, and their logs (kept in a file). Free of test
 * framework imports, so benchmarks use it too; tests use `useProcesses()` from ./processes.ts.
 *
 *   const group = new ProcessGroup();
 *   const p = await group.start('manager', ['manager'], { env });
 *   await p.waitForLog((l) => l.msg === 'ready');
 *   p.kill();                                       // SIGKILL
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { tempDir } from './tmp.js';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
/** The `excompact` command as installed: what an operator runs (it picks the bundle for client commands). */
export const BIN = fileURLToPath(new URL('../../bin/excompact.js', import.meta.url));

/** One parsed JSON log line (pino), or `{ msg: <raw line> }` for anything else. */
export type LogLine = Record<string, unknown> & { msg?: string };

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** Resolve start() only once a log line matches (default: do not wait). */
  readyWhen?: (line: LogLine) => boolean;
  readyTimeoutMs?: number;
}

export class ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  readonly lines: LogLine[] = [];
  private readonly waiters = new Set<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  private readonly lineListeners: ((line: LogLine) => void)[] = [];
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    name: string,
    child: ChildProcess,
    logFile: string,
    out: WriteStream,
    /** Keep at most this many parsed lines in `lines` (a long run would keep them all). */
    retainLines = Infinity,
  ) {
    this.name = name;
    this.child = child;
    this.logFile = logFile;
    const onLine = (raw: string): void => {
      out.write(`${raw}\n`);
      let line: LogLine;
      try {
        const parsed: unknown = JSON.parse(raw);
        line = typeof parsed === 'object' && parsed !== null ? (parsed as LogLine) : { msg: raw };
      } catch {
        line = { msg: raw };
      }
      this.lines.push(line);
      if (this.lines.length > retainLines) this.lines.splice(0, this.lines.length - retainLines);
      for (const listener of this.lineListeners) listener(line);
      for (const w of this.waiters) {
        if (w.match(line)) {
          this.waiters.delete(w);
          w.resolve(line);
        }
      }
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        out.end();
        resolve({ code, signal });
      }),
    );
  }

  /** Calls `listener` with every later line. */
  onLine(listener: (line: LogLine) => void): void {
    this.lineListeners.push(listener);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first line (already seen or future) that matches; rejects on timeout or exit. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> {
    const seen = this.lines.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const waiter = {
        match,
        resolve: (l: LogLine) => {
          clearTimeout(timer);
          resolve(l);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`${this.name}: no matching log line within ${timeoutMs} ms\n${this.tail()}`));
      }, timeoutMs);
      this.waiters.add(waiter);
      void this.exited.then(({ code, signal }) => {
        if (!this.waiters.has(waiter)) return;
        this.waiters.delete(waiter);
        clearTimeout(timer);
        reject(
          new Error(
            `${this.name} exited (code ${code}, signal ${signal}) before the awaited log line\n${this.tail()}`,
          ),
        );
      });
    });
  }

  /** SIGKILL: the process dies at once, without any cleanup. */
  kill(): void {
    this.signal('SIGKILL');
  }
  /** SIGSTOP: the process freezes; its sockets stay open. */
  pause(): void {
    this.signal('SIGSTOP');
  }
  /** SIGCONT. */
  resume(): void {
    this.signal('SIGCONT');
  }

  signal(sig: NodeJS.Signals): void {
    if (this.running) this.child.kill(sig);
  }

  /** Resolves with the exit code and signal whenever the process exits. */
  get exit(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.exited;
  }

  /** Resolves with the exit code and signal (waits for it). */
  waitExit(timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return withTimeout(this.exited, timeoutMs, `${this.name} did not exit within ${timeoutMs} ms`);
  }

  /** SIGTERM and wait for the exit. */
  async terminate(timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    return this.waitExit(timeoutMs);
  }

  /** The last lines of output, for failure messages. */
  tail(lines = 40): string {
    try {
      const text = readFileSync(this.logFile, 'utf8').trimEnd().split('\n');
      return `--- ${this.name} (pid ${this.child.pid}), last ${Math.min(lines, text.length)} lines of ${this.logFile}\n${text.slice(-lines).join('\n')}`;
    } catch {
      return `--- ${this.name}: no log`;
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const everyChild = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of everyChild) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

export interface ProcessGroupOptions {
  /** Where the logs go (default: a temporary directory, removed by {@link ProcessGroup.cleanup}). */
  dir?: string;
  /** Parsed log lines each process keeps in memory (default: all). */
  retainLines?: number;
}

export class ProcessGroup {
  readonly procs: ManagedProcess[] = [];
  private readonly dir: { path: string; cleanup: () => void };
  private counter = 0;

  constructor(private readonly options: ProcessGroupOptions = {}) {
    this.dir = options.dir ? { path: options.dir, cleanup: () => undefined } : tempDir('procs');
  }

  /** The directory holding every process's log. */
  get logDir(): string {
    return this.dir.path;
  }

  /** Spawns `node dist/cli/main.js <args>` with the given environment. */
  async start(name: string, args: string[], options: StartOptions = {}): Promise<ManagedProcess> {
    return this.spawn(name, process.execPath, [CLI, ...args], options);
  }

  /** Spawns any command (for tools that are not the project's CLI). */
  async spawn(
    name: string,
    command: string,
    args: string[],
    options: StartOptions = {},
  ): Promise<ManagedProcess> {
    const logFile = join(this.dir.path, `${String(++this.counter).padStart(2, '0')}-${name}.log`);
    const out = createWriteStream(logFile);
    const child = spawn(command, args, {
      env: { ...process.env, EXC_LOG_LEVEL: 'debug', EXC_EXIT_WITH_PARENT: '1', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    everyChild.add(child);
    child.once('exit', () => everyChild.delete(child));
    const proc = new ManagedProcess(name, child, logFile, out, this.options.retainLines);
    this.procs.push(proc);
    if (options.readyWhen) await proc.waitForLog(options.readyWhen, options.readyTimeoutMs ?? 30_000);
    return proc;
  }

  /** Logs of every process, for a failed test. */
  dump(): string {
    return this.procs.map((p) => p.tail()).join('\n');
  }

  /** SIGKILLs whatever still runs (resuming paused ones first is unnecessary: SIGKILL works on them). */
  async stopAll(): Promise<void> {
    await Promise.all(
      this.procs.map(async (p) => {
        if (!p.running) return;
        p.kill();
        await p.waitExit(5_000).catch(() => undefined);
      }),
    );
  }

  cleanup(): void {
    this.dir.cleanup();
  }
}

/** Runs the `excompact` command to completion: its exit code and output. */
export function runCli(
  args: string[],
  options: { env?: Record<string, string | undefined>; input?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    everyChild.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `excompact ${args.join(' ')} did not finish within ${options.timeoutMs ?? 60_000} ms\n${stdout}\n${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      everyChild.delete(child);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}
