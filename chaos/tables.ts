/**
 * The chaos run's tables as the workload sees them: each table's spec, its exact model, the cells its
 * writes chose so far, and the fence that holds new writes while a scan compares the table with the model.
 */
import { TableModel, type ChaosEntry } from './model.js';

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
    this.model = new TableModel(spec.name, seed, spec.versions, spec.ttlMs, spec.valueBytes);
  }

  /** Resolves when no fence holds the table (check `open` again: a fence may be taken meanwhile). */
  get opened(): Promise<void> | undefined {
    return this.gate?.promise;
  }

  /** Puts in flight per cell: a delete of such a cell waits (see makeOp). */
  readonly puttingTo = new Map<string, number>();

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
