/** A promise-chain mutex: callers run one at a time, in arrival order. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    // The next caller waits for this one to settle, whatever its outcome.
    this.tail = result.catch(() => undefined);
    return result;
  }
}
