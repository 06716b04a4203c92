/**
 * The chaos run's record: every event (faults, exits, restarts, checks) as a JSON line in
 * `<run dir>/chaos.jsonl`, each with its time since the start; the notable ones also on stdout.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { describeError } from '../src/errors.js';
import { sleep } from '../src/retry.js';

export class ChaosLog {
  readonly started = Date.now();
  private readonly out: WriteStream;

  constructor(
    readonly file: string,
    private readonly echo: (line: string) => void = (line) => void process.stdout.write(`${line}\n`),
  ) {
    this.out = createWriteStream(file, { flags: 'a' });
  }

  /** Seconds since the start, as printed. */
  elapsed(at = Date.now()): string {
    return ((at - this.started) / 1000).toFixed(1).padStart(7);
  }

  /** Records an event; `say` also prints it. */
  event(kind: string, fields: Record<string, unknown> = {}, say?: string): void {
    const now = Date.now();
    this.out.write(`${JSON.stringify({ t: (now - this.started) / 1000, at: now, kind, ...fields })}\n`);
    if (say !== undefined) this.echo(`[${this.elapsed(now)}s] ${say}`);
  }

  /** Prints a line without recording it. */
  say(line: string): void {
    this.echo(`[${this.elapsed()}s] ${line}`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.out.end(resolve));
  }
}

/** The p-th percentile (0-100) of `values`, nearest rank; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * A call of the run's own bookkeeping, retried for up to two minutes: a manager that loses its session or
 * hands over mid-request refuses it (as it should), which is no finding of the run.
 */
export async function patiently<T>(what: string, log: ChaosLog, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      log.event('harness-retry', { what, err: describeError(err) });
      await sleep(1_000);
    }
  }
}
