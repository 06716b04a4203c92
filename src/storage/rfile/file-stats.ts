/**
 * The statistics a file's summary reports ({@link FileStats}: delete markers, oldest and newest
 * timestamp, key and value bytes, entries per column family), counted by the encoder as entries go in,
 * so that compaction selectors read no data. FileStats is declared here, with no runtime imports, so
 * that the checkpoint's codec (encoder-state.ts) and the writer's types (writer-types.ts, which
 * re-exports it) can both use it without an import cycle.
 *
 * A block's figures reach the file's only once the block is placed: a checkpoint is taken right after a
 * placement, while later blocks may still be being deflated or filled, and a run resumed from it writes
 * those blocks again. So a sealed block carries its figures until it is placed (writer.ts, SealedBlock),
 * the checkpoint carries the placed blocks' figures, and a resumed run reports exactly what an unbroken
 * one does.
 *
 * Families are counted as Accumulo's summarizers count them, in bounded memory: a block counts the
 * first {@link MAX_FAMILIES} families it meets (in entry order), the entries of any other in its
 * `otherFamilies`. Placing a block adds its counts to the file's table; a family new to the file joins
 * it while it has fewer than MAX_FAMILIES, otherwise its count goes to the file's `otherFamilies`. The
 * native merge (native/merge.c) follows the same rule over the same blocks, so both give the same stats.
 */
import type { BlockEntry } from './block-entry.js';
import type { Entry } from '../key.js';

/** Families a block, and a file, count by name; the others' entries are counted together. */
export const MAX_FAMILIES = 16;

/** What a file holds beside its entry count: recorded as it is written, so selection reads no data. */
export interface FileStats {
  /** Delete markers among its entries. */
  deletes: number;
  /** The oldest and newest timestamp of its entries. */
  oldestTs: number;
  newestTs: number;
  /** Bytes of the entries' keys (row, family and qualifier; not the timestamp or flags) and of their values. */
  keyBytes: number;
  valueBytes: number;
  /**
   * Entries per column family, as [family bytes in lower-case hex, entries] sorted by family, at most
   * MAX_FAMILIES (16) of them; entries of the families beyond those are counted in otherFamilies.
   */
  families: [string, number][];
  otherFamilies: number;
}

/**
 * A data block's figures as the native merge reports them (AssembledBlock): its families as bytes, in
 * the order the block met them.
 */
export interface AssembledStats extends Omit<FileStats, 'families'> {
  families: [Buffer, number][];
}

/**
 * A sealed block's figures, until it is placed: FileStats, but its families in the order the block met
 * them (the order they join the file's table in).
 */
export type BlockStats = FileStats;

/** The placed blocks' figures; `oldestTs` is Infinity while there are none. */
interface Placed extends Omit<FileStats, 'families'> {
  /** Family (hex) to entries: membership is what the rule reads; the summary sorts them. */
  families: Map<string, number>;
}

/** Families longer than this are compared by Buffer.compare: a byte loop is faster below. */
const SHORT_FAMILY = 32;

/** Whether bytes [as, ae) of a and [bs, be) of b are equal. */
function same(a: Buffer, as: number, ae: number, b: Buffer, bs: number, be: number): boolean {
  const n = ae - as;
  if (n !== be - bs) return false;
  if (n > SHORT_FAMILY) return a.compare(b, bs, be, as, ae) === 0;
  for (let i = 0; i < n; i++) if (a[as + i] !== b[bs + i]) return false;
  return true;
}

/** A family's slot in a block's table when it is not in it. */
const OTHER = -1;

/** The figures of the block being filled through add(). */
class BlockTally {
  deletes = 0;
  oldestTs = Infinity;
  newestTs = -Infinity;
  keyBytes = 0;
  valueBytes = 0;
  /** The block's families (copies), in the order met, and their entries. */
  private readonly names: Buffer[] = [];
  private readonly counts: number[] = [];
  private otherFamilies = 0;
  /**
   * The previous entry's family, where it lies (the writer keeps that entry, so its bytes stay), and its
   * slot: consecutive entries mostly share their family, and then one comparison finds the slot.
   */
  private prevBytes: Buffer | null = null;
  private prevStart = 0;
  private prevEnd = 0;
  private prevSlot = OTHER;

  /** An entry of the family at bytes [start, end) of `bytes`. */
  family(bytes: Buffer, start: number, end: number): void {
    const prev = this.prevBytes;
    const slot =
      prev !== null && same(prev, this.prevStart, this.prevEnd, bytes, start, end)
        ? this.prevSlot
        : this.slotOf(bytes, start, end);
    this.prevBytes = bytes;
    this.prevStart = start;
    this.prevEnd = end;
    this.prevSlot = slot;
    if (slot === OTHER) this.otherFamilies++;
    else this.counts[slot]!++;
  }

  /** The family's slot; a new one while the table has room. */
  private slotOf(bytes: Buffer, start: number, end: number): number {
    const names = this.names;
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      if (same(name, 0, name.length, bytes, start, end)) return i;
    }
    if (names.length === MAX_FAMILIES) return OTHER;
    names.push(Buffer.from(bytes.subarray(start, end)));
    this.counts.push(0);
    return names.length - 1;
  }

  stats(): BlockStats {
    return {
      deletes: this.deletes,
      oldestTs: this.oldestTs,
      newestTs: this.newestTs,
      keyBytes: this.keyBytes,
      valueBytes: this.valueBytes,
      families: this.names.map((name, i) => [name.toString('hex'), this.counts[i]!]),
      otherFamilies: this.otherFamilies,
    };
  }
}

const emptyPlaced = (): Placed => ({
  deletes: 0,
  oldestTs: Infinity,
  newestTs: -Infinity,
  keyBytes: 0,
  valueBytes: 0,
  families: new Map(),
  otherFamilies: 0,
});

export class FileStatsCounter {
  /** The block being filled through add(). */
  private block = new BlockTally();
  /** The block being filled is one the native merge assembled, with these figures. */
  private assembledBlock: BlockStats | null = null;
  /** The blocks placed; null when resumed from a checkpoint that did not record them. */
  private readonly placed: Placed | null;

  /** `resume`: the checkpoint state (encoder-state.ts) the file goes on from. */
  constructor(resume?: { stats?: FileStats | null }) {
    if (resume === undefined || resume.stats === null) this.placed = emptyPlaced();
    else if (resume.stats === undefined) this.placed = null;
    else this.placed = { ...resume.stats, families: new Map(resume.stats.families) };
  }

  /** A plain entry added to the block being filled. */
  entry(e: Entry): void {
    const k = e.key;
    this.common(k.timestamp, k.deleted, k.row.length + k.family.length + k.qualifier.length, e.value.length);
    this.block.family(k.family, 0, k.family.length);
  }

  /** A decoded entry added to the block being filled: from its offsets (its key would make Buffers). */
  blockEntry(e: BlockEntry): void {
    this.common(e.timestamp, e.deleted, e.valueStart - e.rowStart, e.end - e.valueStart);
    this.block.family(e.block, e.familyStart, e.qualifierStart);
  }

  private common(timestamp: number, deleted: boolean, keyBytes: number, valueBytes: number): void {
    const b = this.block;
    if (deleted) b.deletes++;
    if (timestamp < b.oldestTs) b.oldestTs = timestamp;
    if (timestamp > b.newestTs) b.newestTs = timestamp;
    b.keyBytes += keyBytes;
    b.valueBytes += valueBytes;
  }

  /** The block being filled is one assembled by the native merge, with these figures (AssembledBlock). */
  assembled(a: AssembledStats): void {
    this.assembledBlock = {
      deletes: a.deletes,
      oldestTs: a.oldestTs,
      newestTs: a.newestTs,
      keyBytes: a.keyBytes,
      valueBytes: a.valueBytes,
      families: a.families.map(([name, n]) => [name.toString('hex'), n]),
      otherFamilies: a.otherFamilies,
    };
  }

  /** The block being filled is sealed: its figures, to hand to {@link place}; the next one starts empty. */
  seal(): BlockStats {
    const a = this.assembledBlock;
    if (a !== null) {
      this.assembledBlock = null;
      return a;
    }
    const b = this.block;
    this.block = new BlockTally();
    return b.stats();
  }

  /** A sealed block (its figures from {@link seal}) is placed. */
  place(b: BlockStats): void {
    const p = this.placed;
    if (p === null) return;
    p.deletes += b.deletes;
    if (b.oldestTs < p.oldestTs) p.oldestTs = b.oldestTs;
    if (b.newestTs > p.newestTs) p.newestTs = b.newestTs;
    p.keyBytes += b.keyBytes;
    p.valueBytes += b.valueBytes;
    const families = p.families;
    for (const [name, n] of b.families) {
      const had = families.get(name);
      if (had !== undefined) families.set(name, had + n);
      else if (families.size < MAX_FAMILIES) families.set(name, n);
      else p.otherFamilies += n;
    }
    p.otherFamilies += b.otherFamilies;
  }

  /**
   * The placed blocks' figures: what a checkpoint records (null: no entry placed) and, once every block
   * is placed, the file's (undefined: unknown, resumed from a checkpoint without them).
   */
  placedStats(): FileStats | null | undefined {
    const p = this.placed;
    if (p === null) return undefined;
    if (p.oldestTs === Infinity) return null;
    // Lower-case hex sorts as the bytes do: digits before letters, a prefix first.
    const families = [...p.families].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return { ...p, families };
  }
}
