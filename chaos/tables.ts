/**
 * The chaos run's tables as the workload sees them: each table's spec, its exact model, the cells its
 * writes chose so far, and the fence that holds new writes while a scan compares the table with the model.
 */
import { TableModel, cellKey, type ChaosEntry } from './model.js';

export interface TableSpec {
  name: string;
  splits: string[];
  /** `admin table create --config` assignments. */
  config: string[];
  versions: number;
  ttlMs?: number;
  /** Share of the writes. */
  weight: number;
  /** Values of between these many bytes (default 16: see TableModel.valueOf). */
  valueBytes?: [number, number];
  /** Rows per first letter that plain puts choose from (default 300). */
  rowsPerLetter?: number;
  /** Table iterators added after creation (`admin table iterator add <table> <name> <options>`). */
  iterators?: { name: string; options: unknown }[];
  /** A family the table sums (a `sum` iterator's): the workload increments and resets counters in it. */
  counterFamily?: string;
}

export interface Op {
  entries: ChaosEntry[];
  rowGen: number;
  familyGen: number;
}

export class TableState {
  readonly model: TableModel;
  /** Generation of the rows (`<l>tmp<gen>.…`) and the family (`s<gen>`) meant to be filtered out. */
  rowGen = 0;
  familyGen = 0;
  readonly inflight = new Set<{ op: Op; done: Promise<void> }>();
  private gate: { promise: Promise<void>; open: () => void } | undefined;
  /** Cells written as plain rows, for overwrites and deletes. */
  readonly cells: { row: string; cf: string; cq: string }[] = [];
  readonly known = new Set<string>();
  /** Newest delete issued per cell (in flight or acknowledged): puts stay above it. */
  readonly deletes = new Map<string, number>();
  /** Older timestamps already used per cell. */
  readonly oldTs = new Map<string, Set<number>>();
  /** The generation a running user compaction drops (its rows may or may not be gone yet). */
  dropping: { rowGen?: number; familyGen?: number } = {};
  /**
   * A user compaction of this table is under way (set before its first await: two at once would each
   * retire a generation while `dropping` can name only one, and a scan between them would expect rows the
   * other is removing — found by the soak as 347 "lost" entries that were in fact dropped as asked).
   */
  compacting = false;

  constructor(
    readonly spec: TableSpec,
    seed: string,
  ) {
    this.model = new TableModel(
      spec.name,
      seed,
      spec.versions,
      spec.ttlMs,
      spec.valueBytes,
      spec.counterFamily,
    );
  }

  /** Resolves when no fence holds the table (check `open` again: a fence may be taken meanwhile). */
  get opened(): Promise<void> | undefined {
    return this.gate?.promise;
  }

  /** Puts in flight per cell: a delete of such a cell waits (see makeOp). */
  readonly puttingTo = new Map<string, number>();
  /** Counters with a reset in flight: no increment of them starts until it is in (counters.ts). */
  readonly resetting = new Set<string>();

  /**
   * Makes an op once no fence holds its table and runs `write` with it, counted in flight (a fence waits
   * for it) and its puts counted per cell (a delete of such a cell waits: see makeOp).
   */
  async track(running: () => boolean, make: () => Op, write: (op: Op) => Promise<void>): Promise<void> {
    // The gate is checked and the write registered in flight in one synchronous step, so that a fence
    // taken in between cannot miss it.
    for (let gate = this.opened; gate; gate = this.opened) await gate;
    if (!running()) return;
    const op = make();
    if (op.entries.length === 0) return;
    let resolve!: () => void;
    const entry = { op, done: new Promise<void>((r) => (resolve = r)) };
    this.inflight.add(entry);
    const cells = op.entries.filter((e) => !e.delete).map((e) => cellKey(e.row, e.cf, e.cq));
    for (const c of cells) this.puttingTo.set(c, (this.puttingTo.get(c) ?? 0) + 1);
    const resets = op.entries
      .filter((e) => e.delete && this.model.counters?.holds(e.cf))
      .map((e) => cellKey(e.row, e.cf, e.cq));
    for (const c of resets) this.resetting.add(c);
    try {
      await write(op);
    } finally {
      for (const c of cells) {
        const n = this.puttingTo.get(c)! - 1;
        if (n === 0) this.puttingTo.delete(c);
        else this.puttingTo.set(c, n);
      }
      for (const c of resets) this.resetting.delete(c);
      this.inflight.delete(entry);
      resolve();
    }
  }

  /** Holds new writes and waits for those in flight that match `which`. */
  async fence(which: (op: Op) => boolean = () => true): Promise<() => void> {
    while (this.gate) await this.gate.promise;
    let open!: () => void;
    const promise = new Promise<void>((r) => (open = r));
    this.gate = { promise, open };
    await Promise.all([...this.inflight].filter((f) => which(f.op)).map((f) => f.done));
    return () => {
      this.gate = undefined;
      open();
    };
  }
}

/** Jobs of up to 16 KiB of input go to `small`, the rest to `large`. */
const ROUTES = 'queues=small:16384,large';
// Small jobs (at most three files) over tiny files: many compactions, each a full protocol round.
const TUNING = ['ratio=1.5', 'maxFiles=3', 'fileLimit=8', 'maxAttempts=5'];
export const TABLES: TableSpec[] = [
  {
    // Splits by itself: a tablet past 8 KiB splits in two (and a merged pair splits again).
    name: 'events',
    splits: ['c', 'f', 'i', 'l', 'o', 'r', 'u'],
    config: [ROUTES, ...TUNING, 'splitThreshold=8K'],
    versions: 1,
    weight: 5,
  },
  {
    name: 'versioned',
    splits: ['h', 'p'],
    config: [ROUTES, ...TUNING, 'versions=3'],
    versions: 3,
    weight: 3,
  },
  {
    // Large, slow jobs: values of 1–6 KiB, their own queue of throttled compactors (chaos/main.ts), so that
    // kills and pauses land in the middle of jobs that checkpoint (EXC_CHECKPOINT_BYTES in cluster.ts) and
    // of jobs split into sub-jobs, and the next compactor resumes or redoes them. Fewer rows keep the table
    // (and its scans) bounded in a soak: 26 × 60 × 4 cells of 3.5 KiB on average, about 22 MB.
    name: 'bulky',
    splits: ['i', 'r'],
    config: [
      'queues=bulk',
      'ratio=2',
      'maxFiles=4',
      'fileLimit=10',
      'maxAttempts=5',
      'blockSize=4K',
      'splitAbove=256K',
      'maxSplits=3',
    ],
    versions: 1,
    weight: 2,
    valueBytes: [1024, 6 * 1024],
    rowsPerLetter: 60,
  },
  {
    // Merges by itself: neighbours holding less than 16 KiB together (what admin splits cut off).
    name: 'aged',
    splits: ['m'],
    config: [ROUTES, ...TUNING, 'ttl=30d', 'mergeBelow=16K'],
    versions: 1,
    ttlMs: 30 * 86_400_000,
    weight: 2,
  },
  {
    // Counters summed by a `sum` table iterator (chaos/counters.ts), beside plain cells, rows and families
    // that user compactions filter out, and a family aged off by an `ageOff` iterator (the workload's
    // expired puts go there): every scan and every compaction combines and filters.
    name: 'counters',
    splits: ['g', 'p'],
    config: [ROUTES, ...TUNING],
    versions: 1,
    // For the model and the generator (expired puts go to family `a`): the table ages off only `a`.
    ttlMs: 30 * 86_400_000,
    weight: 3,
    iterators: [
      { name: 'sums', options: { type: 'sum', columns: [{ family: 'n' }] } },
      { name: 'expiry', options: { type: 'ageOff', families: ['a'], ttlMs: 30 * 86_400_000 } },
    ],
    counterFamily: 'n',
  },
];
