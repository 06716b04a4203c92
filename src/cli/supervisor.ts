/**
 * A small process supervisor for `excompact local`: runs the project's processes as children, writes each
 * one's log to a file, waits until a child says it is ready, restarts a child that dies unexpectedly, and
 * stops them all in order.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ExcError } from '../errors.js';
import { sleep } from '../retry.js';

export interface ChildSpec {
  name: string;
  args: string[];
  env: Record<string, string | undefined>;
  /** A log line (parsed JSON) that means "ready". */
  ready: (line: Record<string, unknown>) => boolean;
}

export class Supervised {
  child: ChildProcess | undefined;
  restarts = 0;
  /** Fields of the ready line (e.g. the address it listens on). */
  info: Record<string, unknown> = {};
  private stopping = false;

  constructor(
    readonly spec: ChildSpec,
    private readonly cli: string,
    private readonly logDir: string,
    private readonly onEvent: (message: string) => void,
  ) {}

  get logFile(): string {
    return join(this.logDir, `${this.spec.name}.log`);
  }

  /** Starts the child and resolves once it is ready. */
  start(timeoutMs = 60_000): Promise<void> {
    const child = spawn(process.execPath, [this.cli, ...this.spec.args], {
      env: { ...process.env, ...this.spec.env, EXC_EXIT_WITH_PARENT: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    const out = createWriteStream(this.logFile, { flags: 'a' });
    child.stderr.pipe(out, { end: false });
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new ExcError('TIMEOUT', `${this.spec.name} did not become ready; see ${this.logFile}`)),
        timeoutMs,
      );
      createInterface({ input: child.stdout }).on('line', (raw) => {
        out.write(`${raw}\n`);
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(raw) as Record<string, unknown>;
        } catch {
          return;
        }
        if (this.spec.ready(line)) {
          clearTimeout(timer);
          this.info = line;
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(
          new ExcError(
            'UNAVAILABLE',
            `${this.spec.name} exited (code ${code}, signal ${signal}); see ${this.logFile}`,
          ),
        );
      });
    });
    child.once('exit', (code, signal) => {
      out.end();
      if (this.stopping) return;
      this.onEvent(`${this.spec.name} exited (code ${code}, signal ${signal}); restarting in 1 s`);
      void sleep(1_000).then(() => {
        if (this.stopping) return;
        this.restarts++;
        this.start().catch((err: unknown) =>
          this.onEvent(`${this.spec.name} failed to restart: ${(err as Error).message}`),
        );
      });
    });
    return ready;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }
}
