/**
 * The statistics a file's summary reports ({@link FileStats}: delete markers, oldest and newest
 * timestamp), counted by the encoder as entries go in, so that compaction selectors read no data.
 * FileStats is declared here, with no imports, so that the checkpoint's codec (encoder-state.ts) and the
 * writer's types (writer-types.ts, which re-exports it) can both use it without an import cycle.
 *
 * A block's figures reach the file's only once the block is placed: a checkpoint is taken right after a
 * placement, while later blocks may still be being deflated or filled, and a run resumed from it writes
 * those blocks again. So a sealed block carries its figures until it is placed (writer.ts, SealedBlock),
 * the checkpoint carries the placed blocks' figures, and a resumed run reports exactly what an unbroken
 * one does.
 */

/** What a file holds beside its entry count: recorded as it is written, so selection reads no data. */
export interface FileStats {
  /** Delete markers among its entries. */
  deletes: number;
  /** The oldest and newest timestamp of its entries. */
  oldestTs: number;
  newestTs: number;
}

/** Figures of a run of entries; `oldestTs` is Infinity while it has none. */
type Tally = FileStats;

const empty = (): Tally => ({ deletes: 0, oldestTs: Infinity, newestTs: -Infinity });

export class FileStatsCounter {
  /** The block being filled. */
  private block = empty();
  /** The blocks placed; null when resumed from a checkpoint that did not record them. */
  private readonly placed: Tally | null;

  /** `resume`: the checkpoint state (encoder-state.ts) the file goes on from. */
  constructor(resume?: { stats?: FileStats | null }) {
    if (resume === undefined) this.placed = empty();
    else if (resume.stats === undefined) this.placed = null;
    else this.placed = resume.stats === null ? empty() : { ...resume.stats };
  }

  /** An entry added to the block being filled. */
  entry(timestamp: number, deleted: boolean): void {
    const b = this.block;
    if (deleted) b.deletes++;
    if (timestamp < b.oldestTs) b.oldestTs = timestamp;
    if (timestamp > b.newestTs) b.newestTs = timestamp;
  }

  /** The block being filled is one assembled by the native merge, with these figures (AssembledBlock). */
  assembled(a: FileStats): void {
    this.block = { deletes: a.deletes, oldestTs: a.oldestTs, newestTs: a.newestTs };
  }

  /** The block being filled is sealed: its figures, to hand to {@link place}; the next one starts empty. */
  seal(): FileStats {
    const b = this.block;
    this.block = empty();
    return b;
  }

  /** A sealed block (its figures from {@link seal}) is placed. */
  place(b: FileStats): void {
    const p = this.placed;
    if (p === null) return;
    p.deletes += b.deletes;
    if (b.oldestTs < p.oldestTs) p.oldestTs = b.oldestTs;
    if (b.newestTs > p.newestTs) p.newestTs = b.newestTs;
  }

  /**
   * The placed blocks' figures: what a checkpoint records (null: no entry placed) and, once every block
   * is placed, the file's (undefined: unknown, resumed from a checkpoint without them).
   */
  placedStats(): FileStats | null | undefined {
    const p = this.placed;
    if (p === null) return undefined;
    return p.oldestTs === Infinity ? null : { ...p };
  }
}
