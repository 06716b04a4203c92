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
