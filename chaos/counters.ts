/**
 * The chaos run's exact model of counters: cells of a family the table sums with a `sum` combiner
 * (DESIGN.md, "Table iterators"). Each increment is a put of a decimal delta; a reset is a delete. A scan
 * must return each live counter once, its value the sum of the increments acknowledged since its last
 * reset — whichever compactions combined them, split them, resumed or redid them.
 *
 * Counter entries are stamped by the tablet server (as a combined column's writer must: a delete then
 * falls after every put acknowledged before it), and the workload never has an increment and a reset of
 * the same counter in flight at once (chaos/tables.ts), nor a counter twice in one batch (its entries
 * would share the batch's stamp). So the order the cluster applies them in is the order they were
 * acknowledged, and the model is exact.
 */

/** What the model gives and scans return (model.ts's entries and lines, as far as counters read them). */
interface CounterEntry {
  row: string;
  cf: string;
  cq: string;
  delete?: boolean;
  delta?: number;
}
interface Line {
  row: string;
  cf: string;
  cq: string;
  ts: number;
  value: string;
}
interface Tally {
  expected: number;
  lost: number;
  resurrected: number;
  wrong: number;
  counters?: number;
}

const keyOf = (e: { row: string; cf: string; cq: string }): string => `${e.row}/${e.cf}/${e.cq}`;

interface Counter {
  /** The sum of the increments since the last reset; undefined when none was acknowledged since. */
  sum?: bigint;
  /** A reset was acknowledged (a scan showing the counter then is a resurrection, not a stranger). */
  reset: boolean;
}

export class Counters {
  private readonly counters = new Map<string, Counter>();
  increments = 0;
  resets = 0;

  constructor(readonly family: string) {}

  holds(cf: string): boolean {
    return cf === this.family;
  }

  /** Records an acknowledged counter entry: a put of a delta, or a delete (a reset). */
  apply(e: CounterEntry): void {
    const key = keyOf(e);
    const c = this.counters.get(key) ?? { reset: false };
    if (e.delete) {
      c.sum = undefined;
      c.reset = true;
      this.resets++;
    } else {
      c.sum = (c.sum ?? 0n) + BigInt(e.delta!);
      this.increments++;
    }
    this.counters.set(key, c);
  }

  /** Counters with a value a scan must show. */
  get live(): number {
    let n = 0;
    for (const c of this.counters.values()) if (c.sum !== undefined) n++;
    return n;
  }

  /**
   * Adds the counters to a comparison: `scanned` are the lines of this family (in scan order). Each live
   * counter must show once, with its sum (timestamps are the tablet server's and not checked).
   */
  compare(scanned: readonly Line[], result: Tally, note: (what: string, line: string) => void): void {
    const seen = new Set<string>();
    for (const s of scanned) {
      const key = keyOf(s);
      const line = `${s.row}/${s.cf}/${s.cq}@${s.ts}=${s.value}`;
      const want = this.counters.get(key);
      if (seen.has(key)) {
        result.wrong++;
        note('duplicate counter', line);
      } else if (want?.sum !== undefined) {
        if (s.value !== want.sum.toString()) {
          result.wrong++;
          note(`wrong counter (want ${want.sum})`, line);
        }
      } else if (want?.reset) {
        result.resurrected++;
        note('resurrected counter', line);
      } else {
        result.wrong++;
        note('counter never written', line);
      }
      seen.add(key);
    }
    for (const [key, c] of this.counters) {
      if (c.sum === undefined || seen.has(key)) continue;
      result.lost++;
      note('lost counter', `${key}=${c.sum}`);
    }
    result.expected += this.live;
    result.counters = (result.counters ?? 0) + this.live;
  }
}
