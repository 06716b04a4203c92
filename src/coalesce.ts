import { describeError } from './errors.js';
import type { Logger } from './log.js';
import { retry } from './retry.js';

/**
 * Runs an async task one at a time: a call while it runs makes exactly one more run afterwards (however
 * many calls came in), so every caller's request is covered by a run that started after it. Errors are
 * passed to `onError` and do not stop later runs.
 */
export class Coalesced {
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Resolves when a run that started after this call has finished. */
  run(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.task();
        } catch (err) {
          this.onError(err);
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** No more runs; resolves when the current one (if any) is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}

export interface KeptCurrentOptions {
  /** What is read, for the log ("the queues"). */
  what: string;
  /** Reads the source and updates the view (re-arming its watch). */
  read: () => Promise<void>;
  /** The periodic re-read: the backstop for a watch that could not be re-armed after a failed read. */
  everyMs: number;
  /** The first read is retried while this holds (the session is live). */
  retryWhile: () => boolean;
  log: Logger;
}

/**
 * A view kept current by re-reading its source: {@link start} retries the first read until it succeeds,
 * then every {@link refresh} (from a watch or an event) and a periodic re-read coalesce into one more read.
 */
export class KeptCurrent {
  private readonly reads: Coalesced;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: KeptCurrentOptions) {
    this.reads = new Coalesced(options.read, (err) =>
      options.log.warn({ err: describeError(err) }, `could not read ${options.what}`),
    );
  }

  /** Resolves once one read succeeded; from then on the view is re-read periodically too. */
  async start(): Promise<void> {
    const { read, retryWhile, log, what } = this.options;
    await retry(read, {
      attempts: Number.POSITIVE_INFINITY,
      baseMs: 100,
      maxMs: 2_000,
      retryOn: retryWhile,
      onRetry: (err, attempt) => log.warn({ err: describeError(err), attempt }, `could not read ${what} yet`),
    });
    this.timer = setInterval(() => void this.refresh(), this.options.everyMs);
    this.timer.unref();
  }

  /** Re-reads; concurrent calls coalesce into one more read. */
  refresh(): Promise<void> {
    return this.reads.run();
  }

  /** No more reads; resolves when the current one (if any) is over. */
  stop(): Promise<void> {
    clearInterval(this.timer);
    return this.reads.stop();
  }
}
